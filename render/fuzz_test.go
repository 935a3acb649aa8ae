package render

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzSLS renders arbitrary reactor files with arbitrary event data: it
// must never panic, whatever the template or the data holds (a template
// error is an error, not a crash). That event data never executes is
// tested in the reactor package.
func FuzzSLS(f *testing.F) {
	seeds, _ := filepath.Glob("../reactor/testdata/docs/*.sls")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "salt/minion/x/start", "{{ 7*7 }}")
	}
	f.Add("{% for i in range(3) %}a{{ i }}: {}\n{% endfor %}", "t", "v")
	f.Add("{{ data['x'] | json }}", "t", "{% raw %}")
	f.Add("{% if data.x.startswith('a') %}r:\n  local.test.ping:\n    - tgt: '*'\n{% endif %}", "t", "abc")
	f.Add("{{", "t", "")
	f.Add("{% macro m(a) %}{{ a }}{% endmacro %}x: {{ m(data['x']) }}", "t", "}}")
	r := New(Options{})
	f.Fuzz(func(t *testing.T, src, tag, value string) {
		if len(src) > 4096 {
			return
		}
		data := map[string]any{"id": "cam1", "x": value, "data": map[string]any{"x": value}}
		r.SLS("fuzz.sls", []byte(src), tag, data)
	})
}

// FuzzInterpolation: whatever an event's value holds, a file of Salt's
// reactor shape renders to the same structure, with the value whole in
// each scalar that interpolates it.
func FuzzInterpolation(f *testing.F) {
	for _, h := range hostile {
		f.Add(h)
	}
	const tpl = `door_event:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - args:
      - text: {{ data['data']['door'] }}
      - quoted: "{{ data['data']['door'] }}"
      - mid: door {{ data['data']['door'] }}
      - block: |
          {{ data['data']['door'] }}
      - {{ data['data']['door'] }}: key
      - json: {{ data['data'] | json }}
`
	r := New(Options{})
	f.Fuzz(func(t *testing.T, v string) {
		if len(v) > 4096 {
			return
		}
		_, entries, err := r.SLS("/nonexistent/f.sls", []byte(tpl), "t", map[string]any{"id": "cam1", "data": map[string]any{"door": v}})
		if err != nil {
			if utf8.ValidString(v) {
				t.Fatalf("render %q: %v", v, err)
			}
			return
		}
		if len(entries) != 1 || entries[0].ID != "door_event" {
			t.Fatalf("value %q: got entries %v, want door_event alone", v, entries)
		}
		body, _ := entries[0].Value.(map[string]any)["local.test.echo"].([]any)
		if len(body) != 2 {
			t.Fatalf("value %q: got %v, want tgt and args", v, body)
		}
		args, _ := body[1].(map[string]any)["args"].([]any)
		if len(args) != 6 {
			t.Fatalf("value %q: got %d args %v, want 6", v, len(args), args)
		}
		if got := args[1].(map[string]any)["quoted"]; got != v {
			t.Errorf("quoted: got %q, want %q", got, v)
		}
		if got := args[3].(map[string]any)["block"]; got != v+"\n" {
			t.Errorf("block: got %q, want %q", got, v+"\n")
		}
		if got, ok := args[4].(map[string]any)[v]; !ok || got != "key" {
			t.Errorf("key: got %v, want %q: key", args[4], v)
		}
		if utf8.ValidString(v) {
			if got := args[5].(map[string]any)["json"]; !reflect.DeepEqual(got, map[string]any{"door": v}) {
				t.Errorf("json: got %q, want door: %q", got, v)
			}
		}
	})
}
