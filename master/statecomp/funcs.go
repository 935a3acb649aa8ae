package statecomp

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/targets"
)

// renderFunc is a salt[] function a template may call at render time on
// the master, about device d.
type renderFunc func(c *Compiler, d *device, args []any, kw map[string]any) (any, error)

// renderFuncs are the functions evaluated on the master: what it knows of
// a device (grains, pillar, its id) and its own config. Salt's modules:
// salt/modules/grains.py, pillar.py, config.py, match.py, test.py.
var renderFuncs map[string]renderFunc

func init() {
	renderFuncs = map[string]renderFunc{
		"grains.get":   func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return getPath(d.grains, a, kw) },
		"grains.fetch": func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return getPath(d.grains, a, kw) },
		"grains.item":  func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return items(d.grains, a), nil },
		"grains.items": func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return d.grains, nil },
		"grains.ls":    func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return keys(d.grains), nil },
		"pillar.get":   func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return getPath(d.pillar, a, kw) },
		"pillar.fetch": func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return getPath(d.pillar, a, kw) },
		"pillar.item":  func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return items(d.pillar, a), nil },
		"pillar.items": func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return d.pillar, nil },
		"pillar.raw":   func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return d.pillar, nil },
		"pillar.ls":    func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) { return keys(d.pillar), nil },
		// config.get looks in the config, then grains, then pillar
		// (salt/modules/config.py get, merge unset).
		"config.get":    configGet,
		"config.option": configGet,
		"test.ping":     func(*Compiler, *device, []any, map[string]any) (any, error) { return true, nil },
		"test.true":     func(*Compiler, *device, []any, map[string]any) (any, error) { return true, nil },
		"test.false":    func(*Compiler, *device, []any, map[string]any) (any, error) { return false, nil },
		"test.echo": func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) {
			if len(a) == 0 {
				return "", nil
			}
			return a[0], nil
		},
	}
	for _, t := range []string{"glob", "pcre", "list", "grain", "grain_pcre", "pillar", "pillar_pcre", "pillar_exact", "ipcidr", "compound"} {
		renderFuncs["match."+t] = matchFunc(t)
	}
}

// saltFor is the render.Context.Salt of device d.
func (c *Compiler) saltFor(d *device) func(string) (render.SaltFunc, string, bool) {
	return func(name string) (render.SaltFunc, string, bool) {
		f, ok := renderFuncs[name]
		if !ok {
			return nil, fmt.Sprintf("cannot run at render time on the master: states render on the master, which evaluates only grains.*, pillar.*, config.get, match.* and test.* there (not on %s)", d.id), false
		}
		return func(args []any, kw map[string]any) (any, error) { return f(c, d, args, kw) }, "", true
	}
}

func argStr(a []any, kw map[string]any, i int, name, def string) string {
	if v, ok := kw[name]; ok {
		return fmt.Sprint(v)
	}
	if i < len(a) && a[i] != nil {
		return fmt.Sprint(a[i])
	}
	return def
}

// getPath is Salt's traverse_dict_and_list: key "a:b:0" walks maps and
// lists; the default (second argument or default=, else "") when it is
// not there.
func getPath(m map[string]any, a []any, kw map[string]any) (any, error) {
	if len(a) == 0 && kw["key"] == nil {
		return nil, fmt.Errorf("a key is required")
	}
	key := argStr(a, kw, 0, "key", "")
	var def any = ""
	if len(a) > 1 {
		def = a[1]
	} else if v, ok := kw["default"]; ok {
		def = v
	}
	delim := argStr(a, kw, 2, "delimiter", ":")
	if v, ok := traverse(m, key, delim); ok {
		return v, nil
	}
	return def, nil
}

func traverse(m map[string]any, key, delim string) (any, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	var cur any = m
	for _, part := range strings.Split(key, delim) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func items(m map[string]any, a []any) map[string]any {
	out := make(map[string]any, len(a))
	for _, k := range a {
		s := fmt.Sprint(k)
		if v, ok := m[s]; ok {
			out[s] = v
		}
	}
	return out
}

func keys(m map[string]any) []any {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	out := make([]any, len(ks))
	for i, k := range ks {
		out[i] = k
	}
	return out
}

func configGet(c *Compiler, d *device, a []any, kw map[string]any) (any, error) {
	if len(a) == 0 && kw["key"] == nil {
		return nil, fmt.Errorf("a key is required")
	}
	key := argStr(a, kw, 0, "key", "")
	delim := argStr(a, kw, 2, "delimiter", ":")
	for _, m := range []map[string]any{c.opts, d.grains, d.pillar} {
		if v, ok := traverse(m, key, delim); ok {
			return v, nil
		}
	}
	if len(a) > 1 {
		return a[1], nil
	}
	if v, ok := kw["default"]; ok {
		return v, nil
	}
	return "", nil
}

func matchFunc(tgtType string) renderFunc {
	return func(c *Compiler, d *device, a []any, kw map[string]any) (any, error) {
		if len(a) == 0 && kw["tgt"] == nil {
			return nil, fmt.Errorf("a target is required")
		}
		tgt := argStr(a, kw, 0, "tgt", "")
		delim := argStr(a, kw, 1, "delimiter", "")
		if id, ok := kw["minion_id"]; ok && fmt.Sprint(id) != d.id {
			return nil, fmt.Errorf("minion_id other than the device's own is not known at render time")
		}
		return c.match(d, tgtType, tgt, delim)
	}
}

// match evaluates a target against device d; compiled targets are cached.
func (c *Compiler) match(d *device, tgtType, tgt, delim string) (bool, error) {
	k := tgtType + "\x00" + delim + "\x00" + tgt
	c.mu.Lock()
	m, ok := c.matchers[k]
	c.mu.Unlock()
	if !ok {
		var err error
		if m, err = targets.Compile(tgt, tgtType, targets.Options{Delimiter: delim, Nodegroups: c.nodegroups}); err != nil {
			return false, err
		}
		c.mu.Lock()
		if len(c.matchers) > 4096 {
			clear(c.matchers)
		}
		c.matchers[k] = m
		c.mu.Unlock()
	}
	return m.Match(&targets.Minion{ID: d.id, Grains: d.grains, Pillar: d.pillar, Index: d.index}), nil
}
