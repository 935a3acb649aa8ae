package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/internal/saltdata"
)

// The grains functions that change the agent's grains file (Salt's
// /etc/salt/grains, Halite's CONFIG_DIR/grains), after salt/modules/grains.py.
// Each writes the file, refreshes the running agent's grains and sends them
// to the master, as Salt's setvals calls saltutil.refresh_grains.

// modgrainsfileModule is the grains functions of modgrainsfile.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modgrainsfileModule = module{name: "grains", funcs: []function{
	{
		name:   "setval",
		params: []param{{name: "key", required: true}, {name: "val", required: true}, {name: "destructive", def: false}, {name: "refresh_pillar", def: true}},
		doc: `Set a grain in the grains file (CONFIG_DIR/grains) and refresh the
grains. Returns {key: val}. With destructive=True a val of None removes the
grain from the file.

CLI Example:

    halite '*' grains.setval key val
    halite '*' grains.setval key "{'sub-key': 'val', 'sub-key2': 'val2'}"`,
		run: func(_ context.Context, c *call) (any, error) {
			key, err := c.need("key")
			if err != nil {
				return nil, err
			}
			return setvals(c, map[string]any{key: c.arg("val")}, isTrue(c.arg("destructive")))
		},
	},
	{
		name:   "setvals",
		params: []param{{name: "grains", required: true}, {name: "destructive", def: false}, {name: "refresh_pillar", def: true}},
		doc: `Set several grains in the grains file from a dict and refresh the
grains. Returns the dict.

CLI Example:

    halite '*' grains.setvals "{'key1': 'val1', 'key2': 'val2'}"`,
		run: func(_ context.Context, c *call) (any, error) {
			m, ok := c.arg("grains").(map[string]any)
			if !ok {
				return nil, invalidf("setvals grains must be a dictionary.")
			}
			return setvals(c, m, isTrue(c.arg("destructive")))
		},
	},
	{
		name: "append",
		params: []param{{name: "key", required: true}, {name: "val", required: true}, {name: "convert", def: false},
			{name: "delimiter", def: saltdata.DefaultDelimiter}},
		doc: `Append val (or each item of a list val) to the list grain key in the
grains file, making the list if the grain is missing. convert=True turns a
grain that is not a list into one. Nested keys use delimiter (":").

CLI Example:

    halite '*' grains.append roles web`,
		run: grainsAppend,
	},
	{
		name: "set",
		params: []param{{name: "key", required: true}, {name: "val", def: ""}, {name: "force", def: false},
			{name: "destructive", def: false}, {name: "delimiter", def: saltdata.DefaultDelimiter}},
		doc: `Set a grain, nested keys included (apps:myApp:port), in the grains
file. A grain that is a dict or a list, or a dict or list val over an
existing grain, needs force=True. Returns {comment, changes, result}.

CLI Example:

    halite '*' grains.set 'apps:myApp:port' 2209`,
		run: func(_ context.Context, c *call) (any, error) {
			return grainsSet(c, c.arg("val"), isTrue(c.arg("force")), isTrue(c.arg("destructive")))
		},
	},
	{
		name:   "delval",
		params: []param{{name: "key", required: true}, {name: "destructive", def: false}, {name: "force", def: false}},
		doc: `Set a grain in the grains file to None, or with destructive=True
remove it. Returns {comment, changes, result}.

CLI Example:

    halite '*' grains.delval key destructive=True`,
		run: func(_ context.Context, c *call) (any, error) {
			c.named["delimiter"] = saltdata.DefaultDelimiter
			return grainsSet(c, nil, isTrue(c.arg("force")), isTrue(c.arg("destructive")))
		},
	},
}}

func init() { register(modgrainsfileModule) }

// need returns a required string parameter.
func (c *call) need(name string) (string, error) {
	s, ok, err := c.str(name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalidf("%s must be a string, not None", name)
	}
	return s, nil
}

// setvals is Salt's grains.setvals: the grains file updated, the grains
// refreshed and sent to the master. A file that cannot be read is left as
// it is, and Salt's message returned.
func setvals(c *call, set map[string]any, destructive bool) (any, error) {
	g, err := c.e.grains.UpdateFile(func(file map[string]any) error {
		for k, v := range set {
			if v == nil && destructive {
				delete(file, k)
				continue
			}
			file[k] = v
		}
		return nil
	})
	var bad *grains.BadFileError
	switch {
	case errors.As(err, &bad):
		return "Unable to read existing grains file: " + bad.Err.Error(), nil
	case err != nil:
		return nil, commandf("%v", err)
	}
	if c.e.onRefresh != nil {
		c.e.onRefresh(g)
	}
	return set, nil
}

func grainsAppend(_ context.Context, c *call) (any, error) {
	key, err := c.need("key")
	if err != nil {
		return nil, err
	}
	delim, err := c.need("delimiter")
	if err != nil {
		return nil, err
	}
	val := c.arg("val")
	cur := c.e.grains.Get()
	v, ok := saltdata.Traverse(cur, key, delim)
	if !ok {
		v = []any{}
	}
	v = deepCopy(v)
	if isTrue(c.arg("convert")) {
		if _, isList := v.([]any); !isList {
			if v == nil {
				v = []any{}
			} else {
				v = []any{v}
			}
		}
	}
	list, isList := v.([]any)
	if !isList {
		return fmt.Sprintf("The key %s is not a valid list", key), nil
	}
	for _, item := range list {
		if pyEqual(item, val) {
			return fmt.Sprintf("The val %s was already in the list %s", pyStr(val), key), nil
		}
	}
	if vl, ok := val.([]any); ok {
		list = append(list, vl...)
	} else {
		list = append(list, val)
	}
	var value any = list
	for strings.Contains(key, delim) {
		i := strings.LastIndex(key, delim)
		rest := key[i+len(delim):]
		key = key[:i]
		parent, ok := saltdata.Traverse(cur, key, delim)
		if !ok {
			parent = map[string]any{}
		}
		parent = deepCopy(parent)
		if m, ok := parent.(map[string]any); ok {
			m[rest] = value
		}
		value = parent
	}
	return setvals(c, map[string]any{key: value}, false)
}

// grainsSet is Salt's grains.set (grains.delval is set with val None).
func grainsSet(c *call, val any, force, destructive bool) (any, error) {
	key, err := c.need("key")
	if err != nil {
		return nil, err
	}
	delim, err := c.need("delimiter")
	if err != nil {
		return nil, err
	}
	ret := map[string]any{"comment": "", "changes": map[string]any{}, "result": true}
	fail := func(msg string) (any, error) {
		ret["comment"], ret["result"] = msg, false
		return ret, nil
	}
	newComplex := isComplex(val)
	cur := c.e.grains.Get()
	existing, exists := saltdata.Traverse(cur, key, delim)
	if exists && pyEqual(existing, val) && (val != nil || !destructive) {
		ret["comment"] = "Grain is already set"
		return ret, nil
	}
	// Salt's _non_existent sentinel is not None, so a missing grain takes
	// this branch too and is checked as "simple".
	if (!exists || existing != nil) && !force {
		if exists && isComplex(existing) {
			return fail(fmt.Sprintf("The key '%s' exists but is a dict or a list. Use 'force=True' to overwrite.", key))
		}
		if newComplex && exists {
			return fail(fmt.Sprintf("The key '%s' exists and the given value is a dict or a list. Use 'force=True' to overwrite.", key))
		}
	}
	value := deepCopy(val)
	for strings.Contains(key, delim) {
		i := strings.LastIndex(key, delim)
		rest := key[i+len(delim):]
		key = key[:i]
		parent, ok := saltdata.Traverse(cur, key, delim)
		if !ok {
			parent = map[string]any{}
		}
		parent = deepCopy(parent)
		switch p := parent.(type) {
		case map[string]any:
			if value == nil && destructive {
				delete(p, rest)
			} else {
				p[rest] = value
			}
		case []any:
			updated := false
			for j, item := range p {
				if s, ok := item.(string); ok && s == rest {
					p[j] = map[string]any{rest: value}
					updated = true
				} else if m, ok := item.(map[string]any); ok {
					if _, has := m[rest]; has {
						m[rest] = value
						updated = true
					}
				}
			}
			if !updated {
				p = append(p, map[string]any{rest: value})
			}
			parent = p
		default:
			if s, ok := toString(parent); (ok && s == rest) || force {
				parent = map[string]any{rest: value}
			} else {
				return fail(fmt.Sprintf("The key '%s' value is '%s', which is different from the provided key '%s'. Use 'force=True' to overwrite.",
					key, pyStr(parent), rest))
			}
		}
		value = parent
	}
	out, err := setvals(c, map[string]any{key: value}, destructive)
	if err != nil {
		return nil, err
	}
	if m, ok := out.(map[string]any); ok {
		ret["changes"] = m
	} else {
		return fail(fmt.Sprint(out))
	}
	return ret, nil
}

func isComplex(v any) bool {
	switch v.(type) {
	case map[string]any, map[any]any, []any:
		return true
	}
	return false
}

// deepCopy copies maps and lists, so changes never reach the shared grains.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case map[any]any:
		m := make(map[any]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

// pyEqual is Python's == on decoded data: numbers compare by value
// whatever their Go type (1 == 1.0), containers element by element.
func pyEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !pyEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	if _, ok := b.(bool); ok {
		return false
	}
	fa, ok1 := toFloat(a)
	fb, ok2 := toFloat(b)
	if _, s := b.(string); s {
		return false
	}
	if ok1 && ok2 {
		return fa == fb
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// pyStr formats a value as Python's str() does for messages.
func pyStr(v any) string {
	if v == nil {
		return "None"
	}
	if s, ok := toString(v); ok {
		return s
	}
	return fmt.Sprint(v)
}
