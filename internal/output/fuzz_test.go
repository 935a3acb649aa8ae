package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// FuzzStrings checks that any text, as a key and as a value, comes out of
// the json and yaml outputters as data that reads back to the same text.
func FuzzStrings(f *testing.F) {
	for _, s := range []string{
		"", "plain", "yes", "y", "1.0", "null", "~", "- x", "a: b", "#c", " lead", "trail ",
		"it's", `"q"`, "multi\nline\n", "\n\nlead", "tab\tin", "\x00\x1b", "é世界🎥", "\ue000🎥\uf8ff",
		"\u2028", "\ufeffbom", "&anchor", "*alias", "!tag", "%dir", "@at", "`tick", "{flow}", "[seq]",
		// Past column 80, where the emitter folds at spaces.
		strings.Repeat("word ", 30), strings.Repeat("two  ", 30), strings.Repeat("x", 100) + " y",
		strings.Repeat("q: ", 40), strings.Repeat("tab\t ", 30), strings.Repeat("line \n", 30),
		strings.Repeat("a ", 40) + "  \n  " + strings.Repeat("b ", 40),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		// The list ends in a plain word so that Format's trim of
		// trailing white space, which Salt does too, cannot touch s.
		data := []any{s, map[string]any{s: s}, "end"}
		for _, out := range []string{"json", "yaml"} {
			var buf bytes.Buffer
			if err := Format(&buf, out, data, Options{}); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			var got []any
			var err error
			if out == "json" {
				err = json.Unmarshal(buf.Bytes(), &got)
			} else {
				err = yaml.Unmarshal(buf.Bytes(), &got)
			}
			if err != nil {
				t.Fatalf("%s output does not parse: %v\n%s", out, err, buf.String())
			}
			if len(got) != 3 {
				t.Fatalf("%s: got %d items, want 3\n%s", out, len(got), buf.String())
			}
			if got[0] != s {
				t.Errorf("%s: got value %q, want %q\n%s", out, got[0], s, buf.String())
			}
			m, ok := got[1].(map[string]any)
			if !ok || len(m) != 1 || m[s] != s {
				t.Errorf("%s: got map %#v, want {%q: %q}\n%s", out, got[1], s, s, buf.String())
			}
		}
	})
}
