package complete

import (
	"slices"
	"strconv"
	"testing"

	"github.com/spf13/pflag"
)

// TestComplete: which word is a flag's value, a positional argument or a
// flag, from a pflag set like the CLIs'.
func TestComplete(t *testing.T) {
	fs := pflag.NewFlagSet("p", pflag.ContinueOnError)
	fs.StringP("config-dir", "c", "", "")
	fs.BoolP("verbose", "v", false, "")
	fs.StringP("out", "o", "", "")
	fs.String("hidden", "", "")
	fs.MarkHidden("hidden")
	s := Spec{Prog: "p", Flags: fs, DirFlags: []string{"config-dir"},
		Values: func(flag string, _ []string) []string {
			if flag == "out" {
				return []string{"json", "yaml", "$(bad)\n", ":dirs"}
			}
			return nil
		},
		Args: func(pos int, _ []string) []string {
			return []string{"arg" + strconv.Itoa(pos) + "a", "arg" + strconv.Itoa(pos) + "b"}
		},
	}
	tests := []struct {
		words []string
		want  []string
	}{
		{nil, []string{"arg0a", "arg0b"}},
		{[]string{"-"}, []string{"--config-dir", "--out", "--verbose", "-c", "-o", "-v"}},
		{[]string{"--v"}, []string{"--verbose"}},
		{[]string{"-o", ""}, []string{"json", "yaml"}},       // control characters and directives left out
		{[]string{"-vo", "j"}, []string{"json"}},             // -vo: o, last, takes the next word
		{[]string{"-ojson", ""}, []string{"arg0a", "arg0b"}}, // the value is in the word
		{[]string{"--out=y"}, []string{"--out=yaml"}},
		{[]string{"-c", ""}, []string{Dirs}},
		{[]string{"-v", "x", "arg1"}, []string{"arg1a", "arg1b"}},
		{[]string{"--", "-x", ""}, []string{"arg1a", "arg1b"}},
		{[]string{"--", "-"}, nil},
		{[]string{"--hid"}, nil},
	}
	for _, tt := range tests {
		if got := s.Complete(tt.words); !slices.Equal(got, tt.want) {
			t.Errorf("Complete(%q): got %q, want %q", tt.words, got, tt.want)
		}
	}
}

// TestScript: only the three shells, and only a program name that is safe
// in a script.
func TestScript(t *testing.T) {
	for _, sh := range Shells {
		if _, err := Script(sh, "halite-key"); err != nil {
			t.Errorf("Script(%s): %v", sh, err)
		}
	}
	for _, c := range []struct{ shell, prog string }{{"csh", "halite"}, {"bash", "x;rm"}, {"bash", "$(x)"}, {"bash", ""}} {
		if _, err := Script(c.shell, c.prog); err == nil {
			t.Errorf("Script(%q, %q): got no error", c.shell, c.prog)
		}
	}
}
