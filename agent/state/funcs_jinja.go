//go:build reactor

package state

import (
	"github.com/halite-fleet/halite/render"
)

// With -tags reactor (the build that carries gonja), a masterless agent
// renders Jinja SLS files itself, with its grains, an empty pillar and the
// render-time functions the master also evaluates locally.
func init() {
	jinjaRender = func(h Host, file string, src []byte, vars map[string]any) (string, error) {
		grains, _ := vars["grains"].(map[string]any)
		r := render.New(render.Options{Funcs: map[string]any{
			"test.ping":  func() bool { return true },
			"pillar.get": func(key string, def ...any) any { return firstOr(def) },
			"grains.get": func(key string, def ...any) any {
				if v, ok := grains[key]; ok {
					return v
				}
				return firstOr(def)
			},
		}})
		return r.Jinja(file, src, vars)
	}
}

func firstOr(v []any) any {
	if len(v) > 0 {
		return v[0]
	}
	return ""
}
