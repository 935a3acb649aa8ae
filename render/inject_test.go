package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/render/sls"
)

// hostile are event values that, pasted into YAML as text (Salt's way),
// would change the document's structure.
var hostile = []string{
	"open\nevil:\n  local.cmd.run:\n    - tgt: '*'\n    - arg:\n      - rm -rf /",
	"open\n  - tgt: '*'",
	"open\n    - tgt: '*'\n",
	"a: b",
	"a:b",
	"{x: 1}",
	"[1, 2]",
	"&anchor value",
	"*anchor",
	"x\n---\nevil: {local.cmd.run: [{tgt: '*'}]}",
	"x\n...\n",
	"\tx: y",
	"x\ty: z",
	"x\u2028evil: 1",
	"x\u2029evil: 1",
	"x\u0085evil: 1",
	"x\r\nevil: 1",
	"'",
	"\"",
	"# not a comment",
	"| block",
	"> folded",
	"!!python/object/apply:os.system ['id']",
	"%YAML 1.1",
	"- item",
	"? key",
	"<<",
	"{{ 7*7 }}",
	"{% for i in range(9) %}x{% endfor %}",
	"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c]",
	"",
	"   spaced   ",
	"\n",
	strings.Repeat("x", 200) + "\nevil: 1",
	strings.Repeat("word ", 40) + "evil: 1",
	"x\u0080\u009fy\ufeffz\u007f",
}

func render1(t *testing.T, r *Renderer, src string, data map[string]any) []sls.Entry {
	t.Helper()
	_, entries, err := r.SLS("/nonexistent/inject.sls", []byte(src), "door/open", data)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return entries
}

// TestInjection: whatever an event's value holds, it lands inside the one
// scalar of the template that interpolates it, in every position a
// template can put it: plain, quoted, block scalar, beside text, key,
// flow list. The file has the shape of the reactor examples of Salt's
// documentation ("- text: {{ data['data']['door'] }}"; the docs' own files
// are pinned unchanged in reactor/testdata/docs).
func TestInjection(t *testing.T) {
	const tpl = `door_event:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - args:
      - text: {{ data['data']['door'] }}
      - quoted: "{{ data['data']['door'] }}"
      - single: '{{ data['data']['door'] }}'
      - mid: door {{ data['data']['door'] }} now
      - block: |
          {{ data['data']['door'] }}
      - flow: [{{ data['data']['door'] }}, {{ data['id'] }}]
      - {{ data['data']['door'] }}_key: k
      - yaml: {{ data['data'] | yaml }}
      - json: {{ data['data'] | json }}
      - dquote: {{ data['data']['door'] | yaml_dquote }}
      - yamls: {{ data['data']['door'] | yaml }}
`
	r := New(Options{})
	for _, h := range hostile {
		t.Run(strings.ToValidUTF8(h[:min(len(h), 20)], "?"), func(t *testing.T) {
			entries := render1(t, r, tpl, map[string]any{"id": "cam1", "data": map[string]any{"door": h}})
			if len(entries) != 1 || entries[0].ID != "door_event" {
				t.Fatalf("got %d entries %v, want door_event alone", len(entries), entries)
			}
			var plainWant any = h
			if v, _ := resolveAlone(h); v != h {
				plainWant = v // "" is null, as in Salt
			}
			want := map[string]any{"local.test.echo": []any{
				map[string]any{"tgt": "cam1"},
				map[string]any{"args": []any{
					map[string]any{"text": plainWant},
					map[string]any{"quoted": h},
					map[string]any{"single": h},
					map[string]any{"mid": "door " + h + " now"},
					map[string]any{"block": h + "\n"},
					map[string]any{"flow": []any{plainWant, "cam1"}},
					map[string]any{h + "_key": "k"},
					map[string]any{"yaml": map[string]any{"door": h}},
					map[string]any{"json": map[string]any{"door": h}},
					map[string]any{"dquote": h},
					map[string]any{"yamls": h},
				}},
			}}
			if d := cmp.Diff(want, entries[0].Value); d != "" {
				t.Errorf("value (-want +got):\n%s", d)
			}
		})
	}
}

func resolveAlone(s string) (any, error) {
	return sls.ResolveScalar(s)
}

// TestInterpolationTypes: a value alone in a plain scalar keeps Salt's
// typing (a number, a bool, a list stays one; a string reads as a YAML
// scalar), but never more than that one node.
func TestInterpolationTypes(t *testing.T) {
	tests := []struct {
		name string
		tpl  string
		v    any
		want any
	}{
		{"int", "x: {{ data.v }}", 5, 5},
		{"int string", "x: {{ data.v }}", "5", 5},
		{"float string", "x: {{ data.v }}", "1.5", 1.5},
		{"bool", "x: {{ data.v }}", true, true},
		{"yes", "x: {{ data.v }}", "yes", true},
		{"null word", "x: {{ data.v }}", "null", nil},
		{"none", "x: {{ data.v }}", nil, nil},
		{"list", "x: {{ data.v }}", []any{"a", 1}, []any{"a", 1}},
		{"map", "x: {{ data.v }}", map[string]any{"a": []any{1}}, map[string]any{"a": []any{1}}},
		{"list as text", "x: '{{ data.v }}'", []any{"a", 1}, "['a', 1]"},
		{"bool as text", "x: v={{ data.v }}", true, "v=True"},
		{"flow string", "x: {{ data.v }}", "[a, b]", "[a, b]"},
		{"merge word", "x: {{ data.v }}", "<<", "<<"},
		{"key from data does not merge", "x:\n  {{ data.v }}: {a: 1}\n  b: 2", "<<", map[string]any{"<<": map[string]any{"a": 1}, "b": 2}},
		{"template merge", "d: &d {a: 1}\nx:\n  <<: *d\n  b: {{ data.v }}", "2", map[string]any{"a": 1, "b": 2}},
		{"json gives structure", "x: {{ data.v | json }}", map[string]any{"a": "b\nc: d"}, map[string]any{"a": "b\nc: d"}},
		{"tojson gives structure", "x: {{ data.v | tojson }}", []any{"a: b", "- c"}, []any{"a: b", "- c"}},
		{"yaml gives structure", "x: {{ data.v | yaml }}", map[string]any{"a": []any{1, "b"}}, map[string]any{"a": []any{1, "b"}}},
		{"yaml_dquote", "x: {{ data.v | yaml_dquote }}", "a\"\nb: c", "a\"\nb: c"},
		{"condition", "x: {{ data.v if data.v else 'none' }}", "a\nb: c", "a\nb: c"},
		{"alternative", "x: {{ 'yes' if not data.v else data.v }}", "", true},
		{"concatenation", "x: {{ 'pre ' ~ data.v }}", "a\nb: c", "pre a\nb: c"},
		{"set", "{% set d = data.v %}x: {{ d }}", "a\nb: c", "a\nb: c"},
		{"set block", "{% set d %}{{ data.v }}{% endset %}x: {{ d }}", "a\nb: c", "a\nb: c"},
		{"macro", "{% macro m(a) %}- t: {{ a }}{% endmacro %}x:\n  {{ m(data.v) }}", "a\n- b: c", []any{map[string]any{"t": "a\n- b: c"}}},
		{"macro concatenated", "{% macro m(a) %}[{{ a }}]{% endmacro %}x: {{ m(data.v) ~ '' }}", "a\n- b", "[a\n- b]"},
		{"loop", "x:\n{% for i in data.v %}  - {{ i }}\n{% endfor %}", []any{"a: b", "c\n- d"}, []any{"a: b", "c\n- d"}},
		{"upper", "x: {{ data.v | upper }}", "a\nb: c", "A\nB: C"},
		{"join", "x: {{ data.v | join(',') }}", []any{"a\nb: c", "d"}, "a\nb: c,d"},
		{"indent", "x: {{ data.v | indent(2) }}", "a\nb: c", "a\n  b: c"},
		{"escape", "x: {{ data.v | e }}", "a\nb: c", "a\nb: c"},
		{"safe", "x: {{ data.v | safe }}", "a\nb: c", "a\nb: c"},
		{"pprint", "x: {{ data.v | pprint }}", "a\nb: c", `"a\nb: c"`},
		{"default", "x: {{ data.v | default('d') }}", "a\nb: c", "a\nb: c"},
		{"whitespace control", "x: [\n  {{- data.v -}}\n]", "a\nb: c", []any{"a\nb: c"}},
		{"raw stays raw", "x: '{% raw %}{{ v }}{% endraw %}'", "a", "{{ v }}"},
	}
	r := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, entries, err := r.SLS("/nonexistent/t.sls", []byte(tt.tpl), "t", map[string]any{"v": tt.v})
			if err != nil {
				t.Fatal(err)
			}
			var x any
			n := 0
			for _, e := range entries {
				if e.ID == "x" {
					x = e.Value
				}
				if e.ID != "d" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("got entries %v, want x alone", entries)
			}
			if d := cmp.Diff(tt.want, x); d != "" {
				t.Errorf("x (-want +got):\n%s", d)
			}
		})
	}
}

// TestInjectionThroughInclude: a file the reactor file includes or
// imports a macro from interpolates data the same way.
func TestInjectionThroughInclude(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inc.sls"), []byte("  local.test.echo:\n    - text: {{ data['door'] }}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "macros.sls"), []byte("{% macro echo(v) %}local.test.echo:\n    - text: {{ v }}{% endmacro %}\n"), 0o644)
	main := filepath.Join(dir, "main.sls")
	h := "open\nevil:\n  local.cmd.run:\n    - tgt: '*'"
	r := New(Options{})
	for _, src := range []string{
		"door:\n{% include 'inc.sls' %}",
		"{% from 'macros.sls' import echo %}door:\n  {{ echo(data['door']) }}\n",
		"{% import 'macros.sls' as m %}door:\n  {{ m.echo(data['door']) }}\n",
	} {
		_, entries, err := r.SLS(main, []byte(src), "t", map[string]any{"door": h})
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		want := map[string]any{"local.test.echo": []any{map[string]any{"text": h}}}
		if len(entries) != 1 || !cmp.Equal(want, entries[0].Value) {
			t.Errorf("%q: got %v, want door: %v", src, entries, want)
		}
	}
}

// TestAliasBombInTemplate: an alias bomb in the file itself is refused
// quickly with its line; the same text as an event value is a string.
func TestAliasBombInTemplate(t *testing.T) {
	bomb := hostile[29]
	r := New(Options{})
	start := time.Now()
	file := "x: 1\n" + strings.Replace(bomb, "d: [", "d: &d [", 1) +
		"\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
	_, _, err := r.SLS("/nonexistent/b.sls", []byte(file), "t", nil)
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
	se, ok := err.(*sls.Error)
	if !ok || se.Line == 0 || !strings.Contains(se.Error(), "aliases expand") {
		t.Errorf("got %v, want a yaml error naming the alias line", err)
	}
	entries := render1(t, r, "x: {{ data.v }}\n", map[string]any{"v": bomb})
	if len(entries) != 1 || entries[0].Value != bomb {
		t.Errorf("got %v, want x: the bomb as a string", entries)
	}
}
