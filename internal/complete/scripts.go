package complete

import (
	"fmt"
	"regexp"
	"strings"
)

// Shells are the shells Script writes for.
var Shells = []string{"bash", "zsh", "fish"}

// progName is what a program's name may be to be written into a script.
var progName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// Script returns the completion script of prog for shell.
func Script(shell, prog string) (string, error) {
	if !progName.MatchString(prog) {
		return "", fmt.Errorf("completion: program name %q", prog)
	}
	var t string
	switch shell {
	case "bash":
		t = bashScript
	case "zsh":
		t = zshScript
	case "fish":
		t = fishScript
	default:
		return "", fmt.Errorf("completion: unknown shell %q (want %s)", shell, strings.Join(Shells, ", "))
	}
	fn := "_" + strings.ReplaceAll(prog, "-", "_")
	return strings.NewReplacer("PROG", prog, "FUNC", fn).Replace(t), nil
}

// The scripts read the candidates a line each into the reply as they are:
// no word of them is expanded by the shell.

const bashScript = `# bash completion for PROG; source <(PROG --completion bash)
FUNC() {
    local cur words cword
    cur="${COMP_WORDS[COMP_CWORD]}"
    words=("${COMP_WORDS[@]:1:COMP_CWORD}")
    local out
    out=$(PROG __complete "${words[@]}" 2>/dev/null) || return 0
    if [[ "$out" == ":dirs" ]]; then
        compopt -o dirnames 2>/dev/null
        COMPREPLY=()
        return 0
    fi
    COMPREPLY=()
    [[ -n "$out" ]] && mapfile -t COMPREPLY <<< "$out"
    return 0
}
complete -o default -F FUNC PROG
`

const zshScript = `#compdef PROG
# zsh completion for PROG; source <(PROG --completion zsh)
FUNC() {
    local -a cands
    local out
    out=$(PROG __complete "${(@)words[2,CURRENT]}" 2>/dev/null) || return 1
    if [[ "$out" == ":dirs" ]]; then
        _files -/
        return
    fi
    cands=("${(@f)out}")
    (( ${#cands} )) || return 1
    compadd -Q -- "${(@)cands}"
}
compdef FUNC PROG
`

const fishScript = `# fish completion for PROG; PROG --completion fish | source
function __FUNC_complete
    set -l words (commandline -opc)[2..-1] (commandline -ct)
    set -l out (PROG __complete $words 2>/dev/null)
    if test "$out" = ":dirs"
        __fish_complete_directories (commandline -ct)
        return
    end
    printf '%s\n' $out
end
complete -c PROG -f -a '(__FUNC_complete)'
`
