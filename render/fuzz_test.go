package render

import (
	"os"
	"path/filepath"
	"testing"
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
