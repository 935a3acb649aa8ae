package complete

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/halite-fleet/halite/internal/output"
)

// Command is the hidden subcommand the scripts call.
const Command = "__complete"

// Dirs, alone as the answer, asks the script for the shell's own directory
// completion (the value of a flag such as -c).
const Dirs = ":dirs"

// Spec is what a program tells about its command line.
type Spec struct {
	Prog  string
	Flags *pflag.FlagSet
	// Values completes the value of a flag (its long name) given the
	// words typed so far; nil or an empty answer: no candidates.
	Values func(flag string, words []string) []string
	// Args completes positional argument pos (from 0) given the words
	// typed so far; nil: no candidates.
	Args func(pos int, words []string) []string
	// DirFlags are the flags (long names) whose value is a directory.
	DirFlags []string
}

// Complete returns the candidates for the last of words (the command line
// after the program's name; the last word is the one being completed,
// possibly empty), sorted, or []string{Dirs}.
func (s Spec) Complete(words []string) []string {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	pos, wantValue := 0, ""
	dashdash := false
	for _, w := range before {
		switch {
		case wantValue != "":
			wantValue = ""
		case dashdash || w == "-" || !strings.HasPrefix(w, "-"):
			pos++
		case w == "--":
			dashdash = true
		default:
			wantValue = s.valueFlag(w)
		}
	}
	if wantValue != "" {
		return s.value(wantValue, before, cur)
	}
	if !dashdash && strings.HasPrefix(cur, "--") && strings.Contains(cur, "=") {
		name, val, _ := strings.Cut(cur[2:], "=")
		if f := s.Flags.Lookup(name); f != nil && f.Value.Type() != "bool" {
			var out []string
			for _, c := range s.value(name, before, val) {
				if c != Dirs {
					out = append(out, "--"+name+"="+c)
				}
			}
			return out
		}
		return nil
	}
	if !dashdash && strings.HasPrefix(cur, "-") {
		return s.flags(cur)
	}
	if s.Args == nil {
		return nil
	}
	return filter(s.Args(pos, words), cur)
}

// valueFlag returns the long name of w's flag if w is a flag that takes
// its value in the next word, else "".
func (s Spec) valueFlag(w string) string {
	var f *pflag.Flag
	if strings.HasPrefix(w, "--") {
		if strings.Contains(w, "=") {
			return ""
		}
		f = s.Flags.Lookup(w[2:])
	} else {
		// -abc: only the last short flag may take the next word.
		if len(w) < 2 {
			return ""
		}
		for i := 1; i < len(w); i++ {
			f = s.Flags.ShorthandLookup(w[i : i+1])
			if f == nil {
				return ""
			}
			if f.Value.Type() != "bool" {
				if i < len(w)-1 {
					return "" // the value is the rest of the word
				}
				break
			}
		}
	}
	if f == nil || f.Value.Type() == "bool" || f.NoOptDefVal != "" {
		return ""
	}
	return f.Name
}

func (s Spec) value(flag string, words []string, cur string) []string {
	for _, d := range s.DirFlags {
		if d == flag {
			return []string{Dirs}
		}
	}
	if s.Values == nil {
		return nil
	}
	return filter(s.Values(flag, words), cur)
}

// flags lists the flags starting with cur: --long for each, and -x for
// those with a shorthand when cur is "-" or a short prefix.
func (s Spec) flags(cur string) []string {
	var out []string
	s.Flags.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			return
		}
		out = append(out, "--"+f.Name)
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			out = append(out, "-"+f.Shorthand)
		}
	})
	return filter(out, cur)
}

// filter returns the candidates starting with prefix, sorted and without
// duplicates, leaving out any with a control character or starting with
// ':' (the scripts' directives).
func filter(cands []string, prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range cands {
		if c == "" || seen[c] || !strings.HasPrefix(c, prefix) || strings.HasPrefix(c, ":") || strings.ContainsFunc(c, isControl) {
			continue
		}
		seen[c] = true
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// Handle serves the completion parts of a program's command line, called
// before its flags are parsed: "PROG __complete WORD..." prints the
// candidates, "--completion SHELL" (anywhere) prints the script. handled
// is false when args asks for neither; then code means nothing.
func (s Spec) Handle(args []string, stdout, stderr io.Writer) (handled bool, code int) {
	if len(args) > 0 && args[0] == Command {
		for _, c := range s.Complete(args[1:]) {
			fmt.Fprintln(stdout, c)
		}
		return true, 0
	}
	for i, a := range args {
		if a == "--" {
			break
		}
		var shell string
		switch {
		case a == "--completion" && i+1 < len(args):
			shell = args[i+1]
		case strings.HasPrefix(a, "--completion="):
			shell = strings.TrimPrefix(a, "--completion=")
		default:
			continue
		}
		script, err := Script(shell, s.Prog)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", s.Prog, err)
			return true, 64
		}
		io.WriteString(stdout, script)
		return true, 0
	}
	return false, 0
}

// AddFlag adds --completion to fs, for its help text (Handle acts on it
// before fs parses).
func AddFlag(fs *pflag.FlagSet) {
	fs.String("completion", "", "print the shell completion script for bash, zsh or fish, and exit: source <(PROG --completion bash)")
}

// FlagValue returns the value words give flag (its long name; the last one
// wins), or def.
func (s Spec) FlagValue(words []string, flag, def string) string {
	f := s.Flags.Lookup(flag)
	if f == nil {
		return def
	}
	v := def
	for i, w := range words {
		if w == "--" {
			break
		}
		switch {
		case w == "--"+flag || f.Shorthand != "" && w == "-"+f.Shorthand:
			if i+1 < len(words)-1 { // not the word being completed
				v = words[i+1]
			}
		case strings.HasPrefix(w, "--"+flag+"="):
			v = strings.TrimPrefix(w, "--"+flag+"=")
		case f.Shorthand != "" && len(w) > 2 && strings.HasPrefix(w, "-"+f.Shorthand) && !strings.HasPrefix(w, "--"):
			v = w[2:]
		}
	}
	return v
}

// LogLevels are the values of -l/--log-level.
var LogLevels = []string{"all", "garbage", "trace", "debug", "profile", "info", "warning", "error", "critical", "quiet"}

// Common completes the values of the flags every program shares: --out
// and --output (the outputters) and -l/--log-level.
func Common(flag string) []string {
	switch flag {
	case "out", "output":
		return output.Names()
	case "log-level":
		return LogLevels
	}
	return nil
}
