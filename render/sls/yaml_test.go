package sls

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// TestParseYAMLAliasBomb: a plain-YAML reactor file (what the default
// agent reads without Jinja) holding an alias bomb is refused at once,
// with the alias's line; a few anchors reused are fine.
func TestParseYAMLAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		p := "*a" + string(rune('0'+i-1))
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [" + strings.Repeat(p+", ", 8) + p + "]\n")
	}
	start := time.Now()
	_, err := ParseYAML("bomb.sls", b.String())
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v, want well under a second", d)
	}
	var se *Error
	if !errors.As(err, &se) || se.Line != 6 || se.Stage != "yaml" {
		t.Fatalf("got %v, want a yaml error at line 6", err)
	}
	entries, err := ParseYAML("ok.sls", "d: &d {tgt: web1}\nr:\n  local.test.ping:\n    - <<: *d\n    - <<: *d\n")
	if err != nil || len(entries) != 2 {
		t.Fatalf("got %v, %v; want 2 entries", entries, err)
	}
}

// TestResolveScalar: a value alone in a plain scalar is read as a YAML
// scalar on its own, never as structure.
func TestResolveScalar(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{"web1", "web1"}, {"5", 5}, {"0x10", 16}, {"1.5", 1.5}, {"yes", true}, {"Off", false},
		{"true", true}, {"", nil}, {"~", nil}, {"null", nil},
		{"[a, b]", "[a, b]"}, {"{a: 1}", "{a: 1}"}, {"a: b", "a: b"}, {"*x", "*x"}, {"&x y", "&x y"},
		{"!!str 5", "!!str 5"}, {"<<", "<<"}, {"- a", "- a"}, {"a\nb: c", "a\nb: c"}, {"5\n", "5\n"},
	}
	for _, tt := range tests {
		got, err := ResolveScalar(tt.in)
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("ResolveScalar(%q): got %#v, %v; want %#v", tt.in, got, err, tt.want)
		}
	}
}

// TestMarshalFlowYAMLOneLine: |yaml output stays on one line whatever
// the strings hold, so it cannot break out of where a template puts it.
func TestMarshalFlowYAMLOneLine(t *testing.T) {
	for _, v := range []any{
		"a\nb: c", "x\u2028y", "x\u0085y", "x\ry", "\t- a", map[string]any{"k": "v\n- w"}, []any{"a\n", "b\u2029"},
	} {
		s, err := MarshalFlowYAML(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(s, "\n\r\u0085\u2028\u2029") {
			t.Errorf("MarshalFlowYAML(%q) = %q, want one line", v, s)
		}
		entries, err := ParseYAML("x", "x: "+s)
		if err != nil || !cmp.Equal(entries[0].Value, v) {
			t.Errorf("x: %s reads back as %v, %v; want %q", s, entries, err, v)
		}
	}
}

// TestParseYAMLKeys: an ID's keys keep their file order (Salt's state
// compiler runs several state declarations under one ID in that order);
// keys a "<<" merge brings are in Value only.
func TestParseYAMLKeys(t *testing.T) {
	entries, err := ParseYAML("k.sls", "d: &d {z: 1}\nnginx:\n  service.running: []\n  pkg.installed: []\n  file:\n    - managed\n  <<: *d\nshort: test.nop\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"service.running", "pkg.installed", "file"}, entries[1].Keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	if entries[2].Keys != nil || entries[1].Value.(map[string]any)["z"] != 1 {
		t.Errorf("got %v / %v", entries[2].Keys, entries[1].Value)
	}
}

// goYAMLFlow is MarshalFlowYAML as it was with go-yaml's encoder: the node
// (*yaml.Node).Encode makes of v, in flow style (setFlow), written by
// go-yaml.
func goYAMLFlow(v any) (string, error) {
	n := new(yaml.Node)
	if err := n.Encode(v); err != nil {
		return "", err
	}
	setFlow(n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return "", err
	}
	enc.Close()
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// TestMarshalFlowYAMLMatchesGoYAML: the yaml filter writes what it wrote
// with go-yaml's encoder (internal/yamlemit's tests compare the rest).
func TestMarshalFlowYAMLMatchesGoYAML(t *testing.T) {
	strs := []string{"", "a", "a b", "yes", "null", "1", "1.5", "0x1F", "1:20", "2001-12-14", "a: b", "a #b", "- a",
		"a,b", "[a]", "{a}", "'q'", `"d"`, "a\nb", "a\n", "\na", " a", "a ", "a\tb", "\x00", "\u0085", "\u2028",
		"\ufeff", "é", "😀", "\xff\xfe", "<<", "~", "*a", "&a", "!a", "%a", "@a", "`a", "|", ">", "?", ":", "#",
		strings.Repeat("k", 130), strings.Repeat("\xff", 60)}
	var values []any
	for _, s := range strs {
		values = append(values, s, []any{s, 1}, map[string]any{s: s, "k": []any{s}})
	}
	values = append(values, nil, true, 0, -1.5, 1e21, map[string]any{}, []any{}, []any{[]any{}, map[string]any{}},
		map[string]any{"a10": 1, "a9": 2, "b": map[string]any{"c": []any{1, "x", nil}}},
		map[any]any{1: "one", "two": 2, 2.5: true}, []byte("bytes"), uint64(1<<63))
	for _, v := range values {
		want, werr := goYAMLFlow(v)
		got, err := MarshalFlowYAML(v)
		if werr != nil {
			// go-yaml fails to read back a literal block it writes with a
			// leading line break inside a sequence; yamlemit has no such
			// round trip.
			if err != nil {
				t.Errorf("MarshalFlowYAML(%#v): %v", v, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("MarshalFlowYAML(%#v) = %q, %v; go-yaml's encoder wrote %q", v, got, err, want)
		}
	}
}
