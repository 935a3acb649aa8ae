package state

import (
	"fmt"
	"testing"

	"github.com/halite-fleet/halite/render/sls"
)

// cachedTree is a Loader over entries parsed once, as the master's
// compile cache gives them when only the compile must be redone.
type cachedTree map[string][]sls.Entry

func (c cachedTree) Load(env, name string) (string, []sls.Entry, error) {
	e, ok := c[name]
	if !ok {
		return "", nil, fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	return name + ".sls", e, nil
}

// BenchmarkCompile compiles a 20-file highstate (5 states each, with
// includes and requisites) from parsed entries: the part of the
// master's per-device compile this package does.
func BenchmarkCompile(b *testing.B) {
	ct := cachedTree{}
	var mods []string
	for f := 0; f < 20; f++ {
		name := fmt.Sprintf("app%d", f)
		mods = append(mods, name)
		text := ""
		if f > 0 {
			text += fmt.Sprintf("include:\n  - app%d\n", f-1)
		}
		for s := 0; s < 5; s++ {
			text += fmt.Sprintf("%s-s%d:\n  file.managed:\n    - name: /etc/%s/%d.conf\n    - source: salt://%s/%d.conf\n    - mode: '0644'\n    - require:\n      - pkg: %s-pkg\n", name, s, name, s, name, s, name)
		}
		text += fmt.Sprintf("%s-pkg:\n  pkg.installed:\n    - name: %s\n  service.running:\n    - name: %s\n    - watch:\n      - file: /etc/%s/*\n", name, name, name, name)
		entries, err := sls.ParseYAML(name+".sls", text)
		if err != nil {
			b.Fatal(err)
		}
		ct[name] = entries
	}
	// memo=true: as the master compiles, the files' own high data kept
	// between compiles (the entries are the same slices).
	for _, memo := range []bool{false, true} {
		b.Run(fmt.Sprintf("memo=%v", memo), func(b *testing.B) {
			var m *Memo
			if memo {
				m = NewMemo()
			}
			b.ReportAllocs()
			for b.Loop() {
				c := compileMatches(ct, []EnvSLS{{"base", mods}}, false, m)
				if len(c.Errors) > 0 || len(c.Low) != 140 {
					b.Fatalf("%v, %d chunks", c.Errors, len(c.Low))
				}
				if p := Problems(c.Low); len(p) > 0 {
					b.Fatal(p)
				}
			}
		})
	}
}
