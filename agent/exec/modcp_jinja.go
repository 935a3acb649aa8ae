//go:build reactor

package exec

import "github.com/halite-fleet/halite/render"

// With -tags reactor (the build that carries gonja), cp.get_template on a
// masterless agent renders locally.
func init() {
	r := render.New(render.Options{})
	localTemplate = func(name string, src []byte, vars map[string]any) (string, error) {
		return r.Jinja(name, src, vars)
	}
}
