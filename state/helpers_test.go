package state

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/render/sls"
)

// tree is a file_roots in memory: "env/path/to/file.sls" -> YAML text,
// read with the real SLS parser. It implements Loader and Lister.
type tree map[string]string

func dedent(s string) string {
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	ind := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if ind < 0 || n < ind {
			ind = n
		}
	}
	for i, l := range lines {
		if len(l) >= ind && ind > 0 {
			lines[i] = l[ind:]
		}
	}
	return strings.Join(lines, "\n")
}

func (t tree) Load(env, name string) (string, []sls.Entry, error) {
	p := strings.ReplaceAll(name, ".", "/")
	for _, f := range []string{env + "/" + p + ".sls", env + "/" + p + "/init.sls"} {
		if text, ok := t[f]; ok {
			entries, err := sls.ParseYAML(f, dedent(text))
			return f, entries, err
		}
	}
	return "", nil, fmt.Errorf("%s in %s: %w", name, env, ErrNotFound)
}

func (t tree) Envs() []string {
	seen := map[string]bool{}
	var out []string
	for f := range t {
		env := strings.SplitN(f, "/", 2)[0]
		if !seen[env] {
			seen[env] = true
			out = append(out, env)
		}
	}
	sort.Strings(out)
	return out
}

func (t tree) List(env string) []string {
	var out []string
	for f := range t {
		if !strings.HasPrefix(f, env+"/") || !strings.HasSuffix(f, ".sls") {
			continue
		}
		n := strings.TrimSuffix(strings.TrimPrefix(f, env+"/"), ".sls")
		n = strings.TrimSuffix(n, "/init")
		if n == "top" {
			continue
		}
		out = append(out, strings.ReplaceAll(n, "/", "."))
	}
	sort.Strings(out)
	return out
}

// plainLoader is tree without Lister.
type plainLoader struct{ t tree }

func (p plainLoader) Load(env, name string) (string, []sls.Entry, error) { return p.t.Load(env, name) }

// compile compiles mods in base and fails the test on errors.
func compile(t *testing.T, ld Loader, mods ...string) []Chunk {
	t.Helper()
	c := CompileMatches(ld, []EnvSLS{{Env: "base", SLS: mods}})
	if len(c.Errors) > 0 {
		t.Fatalf("compile %v: %v", mods, Strings(c.Errors))
	}
	checkMemo(t, ld, []EnvSLS{{Env: "base", SLS: mods}})
	return c.Low
}

// msgs are the errors' Salt messages.
func msgs(errs []Error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Msg)
	}
	return out
}

// ids are the chunks' __id__ in order.
func ids(low []Chunk) []string {
	var out []string
	for _, c := range low {
		out = append(out, c.ID())
	}
	return out
}

// runIDs are the __id__ of low in Sequence's order.
func runIDs(low []Chunk) []string {
	var out []string
	for _, i := range Sequence(low) {
		out = append(out, low[i].ID())
	}
	return out
}
