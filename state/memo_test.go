package state

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/halite-fleet/halite/render/sls"
)

// keptLoader gives each SLS's entries once loaded, the same slice every
// time, as the master's compile cache does: what a Memo keys on.
type keptLoader struct {
	ld   Loader
	mu   sync.Mutex
	kept map[[2]string]keptLoad
}

type keptLoad struct {
	file    string
	entries []sls.Entry
	err     error
}

func (k *keptLoader) Load(env, name string) (string, []sls.Entry, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l, ok := k.kept[[2]string{env, name}]; ok {
		return l.file, l.entries, l.err
	}
	f, e, err := k.ld.Load(env, name)
	k.kept[[2]string{env, name}] = keptLoad{f, e, err}
	return f, e, err
}

// keptLister is keptLoader over a Loader that is a Lister.
type keptLister struct{ *keptLoader }

func (k keptLister) Envs() []string           { return k.ld.(Lister).Envs() }
func (k keptLister) List(env string) []string { return k.ld.(Lister).List(env) }

func keep(ld Loader) Loader {
	k := &keptLoader{ld: ld, kept: map[[2]string]keptLoad{}}
	if _, ok := ld.(Lister); ok {
		return keptLister{k}
	}
	return k
}

// checkMemo: compiles through a Memo, again and again over the same
// entries (taken from the Memo from the second compile on), and with
// the SLS in the other order (other first auto orders), give what
// compiles without one give.
func checkMemo(t testing.TB, ld Loader, matches []EnvSLS) {
	t.Helper()
	ld = keep(ld)
	rev := make([]EnvSLS, len(matches))
	for i, m := range matches {
		sls := slices.Clone(m.SLS)
		slices.Reverse(sls)
		rev[len(matches)-1-i] = EnvSLS{Env: m.Env, SLS: sls}
	}
	m := NewMemo()
	var gots []Compiled
	for i := 0; i < 6; i++ {
		ms := matches
		if i%2 == 1 {
			ms = rev
		}
		want := compileMatches(ld, ms, true, nil)
		got := compileMatches(ld, ms, true, m)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("compile %d of %v with a Memo (-without +with):\n%s", i, ms, diff)
		}
		gots = append(gots, got)
	}
	// The later compiles changed nothing the earlier ones gave (their
	// chunks may be the Memo's).
	for i, got := range gots {
		ms := matches
		if i%2 == 1 {
			ms = rev
		}
		if diff := cmp.Diff(compileMatches(ld, ms, true, nil), got); diff != "" {
			t.Fatalf("compile %d of %v with a Memo, after the others (-without +with):\n%s", i, ms, diff)
		}
	}
}

// TestMemoSharedChunks: compiles through one Memo, one after the other
// and at once, each give what a compile without it gives, with orders
// that Order rewrites (first, last, a string, names) in chunks the Memo
// shares between them. Run with -race too.
func TestMemoSharedChunks(t *testing.T) {
	files := tree{
		"base/a.sls": `
			include:
			  - b
			a1:
			  test.nop:
			    - order: first
			a2:
			  test.nop:
			    - order: soon
			a3:
			  file.managed:
			    - names:
			      - /x
			      - /y
			`,
		"base/b.sls": `
			b1:
			  test.nop:
			    - order: last
			b2:
			  test.nop:
			    - order: 5
			b3:
			  test.nop: []
			`,
	}
	checkMemo(t, files, []EnvSLS{{Env: "base", SLS: []string{"a", "b"}}})

	ld := keep(files)
	matches := []EnvSLS{{Env: "base", SLS: []string{"a"}}}
	want := compileMatches(ld, matches, false, nil)
	m := NewMemo()
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if diff := cmp.Diff(want, compileMatches(ld, matches, false, m)); diff != "" {
					errs <- diff
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for diff := range errs {
		t.Errorf("compile with a shared Memo (-without +with):\n%s", diff)
	}
}
