package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testLoader is a FileLoader over a map: names are relative to the root,
// "./x" relative to the including file's directory (Salt's SaltCacheLoader
// in salt/utils/jinja.py).
type testLoader map[string]string

func (l testLoader) Resolve(from, name string) (string, error) {
	if strings.HasPrefix(name, "./") || strings.HasPrefix(name, "../") {
		dir := ""
		if i := strings.LastIndexByte(from, '/'); i >= 0 {
			dir = from[:i+1]
		}
		name = dir + strings.TrimPrefix(name, "./")
	}
	if _, ok := l[name]; !ok {
		return "", fmt.Errorf("template %s not found", name)
	}
	return name, nil
}

func (l testLoader) Read(name string) ([]byte, error) {
	s, ok := l[name]
	if !ok {
		return nil, errors.New("not found")
	}
	return []byte(s), nil
}

func saltFuncs(grains map[string]any) func(string) (SaltFunc, string, bool) {
	return func(name string) (SaltFunc, string, bool) {
		switch name {
		case "grains.get":
			return func(args []any, kw map[string]any) (any, error) {
				if v, ok := grains[args[0].(string)]; ok {
					return v, nil
				}
				if len(args) > 1 {
					return args[1], nil
				}
				return "", nil
			}, "", true
		case "cmd.run":
			return nil, "cannot run at render time on the master", false
		}
		return nil, "", false
	}
}

func TestRenderContext(t *testing.T) {
	r := New(Options{})
	files := testLoader{
		"web/map.jinja": "{% set port = 8080 if grains['os'] == 'Debian' else 80 %}",
		"web/init.sls":  "",
	}
	src := `{% from './map.jinja' import port with context %}
pkg_{{ sls }}:
  test.nop:
    - port: {{ port }}
    - os: {{ salt['grains.get']('os') }}
    - kernel: {{ salt.grains.get('kernel', 'none') }}
    - dir: {{ tpldir }}
`
	vars := SLSVars("web", "web/init.sls", "/srv/web/init.sls")
	vars["grains"] = map[string]any{"os": "Debian"}
	_, entries, err := r.Render("web/init.sls", []byte(src), Context{Vars: vars, Salt: saltFuncs(vars["grains"].(map[string]any)), Files: files})
	if err != nil {
		t.Fatal(err)
	}
	got := entries[0].Value
	want := map[string]any{"test.nop": []any{
		map[string]any{"port": 8080}, map[string]any{"os": "Debian"},
		map[string]any{"kernel": "none"}, map[string]any{"dir": "web"}}}
	if entries[0].ID != "pkg_web" || !cmp.Equal(got, want) {
		t.Errorf("got %s %v, want pkg_web %v", entries[0].ID, got, want)
	}
}

func TestRenderRefusedFunctionNamesLine(t *testing.T) {
	r := New(Options{})
	for _, src := range []string{
		"a:\n  test.nop:\n    - x: {{ salt['cmd.run']('id') }}\n",
		"a:\n  test.nop: []\n{% set x = salt['cmd.run']('id') %}\n",
		"a:\n  test.nop: []\n{% set x = salt.cmd.run('id') %}\n",
		"a:\n  test.nop: []\n{% if salt['cmd.run']('id') %}{% endif %}\n",
	} {
		_, _, err := r.Render("f.sls", []byte(src), Context{Salt: saltFuncs(nil)})
		var re *Error
		if !errors.As(err, &re) || re.Line != 3 || !strings.Contains(err.Error(), "salt['cmd.run'] cannot run at render time on the master") {
			t.Errorf("%q: got %v (line %v), want line 3 and the reason", src, err, re)
		}
	}
}

func TestSLSVars(t *testing.T) {
	// salt/utils/templates.py generate_sls_context
	for _, c := range []struct {
		sls, path string
		want      map[string]any
	}{
		{"web", "web/init.sls", map[string]any{"sls": "web", "tplpath": "/r/web/init.sls", "tplfile": "web/init.sls", "tpldir": "web", "tpldot": "web", "slspath": "web", "slsdotpath": "web", "slscolonpath": "web", "sls_path": "web"}},
		{"a.b", "a/b.sls", map[string]any{"sls": "a.b", "tplpath": "/r/a/b.sls", "tplfile": "a/b.sls", "tpldir": "a", "tpldot": "a", "slspath": "a", "slsdotpath": "a", "slscolonpath": "a", "sls_path": "a"}},
		{"top", "top.sls", map[string]any{"sls": "top", "tplpath": "/r/top.sls", "tplfile": "top.sls", "tpldir": ".", "tpldot": "", "slspath": "", "slsdotpath": "", "slscolonpath": "", "sls_path": ""}},
		{"a.b.c", "a/b/c/init.sls", map[string]any{"sls": "a.b.c", "tplpath": "/r/a/b/c/init.sls", "tplfile": "a/b/c/init.sls", "tpldir": "a/b/c", "tpldot": "a.b.c", "slspath": "a/b/c", "slsdotpath": "a.b.c", "slscolonpath": "a:b:c", "sls_path": "a_b_c"}},
	} {
		got := SLSVars(c.sls, c.path, "/r/"+c.path)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: %s", c.sls, d)
		}
	}
}
