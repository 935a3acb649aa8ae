package exec

import (
	"context"
	"fmt"
	"reflect"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// pillar.* after salt/modules/pillar.py, on the pillar the agent keeps in
// memory (Options.Pillar; empty for halite-call --local, which has no
// pillar_roots of its own here). items, ls and obfuscate ask the master
// for a fresh one (Options.FetchPillar), as Salt's compile one; get, item,
// raw and keys read the one in memory.

// notSet is pillar.get's default when none is given (Salt's NOT_SET).
type notSetT struct{}

var notSet = notSetT{}

// modpillarModule is the pillar functions of modpillar.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modpillarModule = module{name: "pillar", funcs: []function{
	{
		name: "get",
		params: []param{{name: "key", required: true}, {name: "default", def: notSet}, {name: "merge", def: false},
			{name: "merge_nested_lists"}, {name: "delimiter", def: saltdata.DefaultDelimiter},
			{name: "pillarenv"}, {name: "saltenv"}},
		doc: `Return the pillar value of key, or default ("" unless given, or an error
with pillar_raise_on_missing) when it is missing. Nested values are reached
with a delimited key (":" by default). merge=True merges the value into a
default that is a dict (recursively; lists too with merge_nested_lists or
pillar_merge_lists) or a list (the value's new items appended).

CLI Example:

    halite '*' pillar.get pkg:apache
    halite '*' pillar.get abc::def|ghi delimiter='|'`,
		run: pillarGet,
	},
	{
		name: "items", varargs: true, varkw: true,
		doc: `Ask the master for this device's pillar and return it (with names:
pillar.item of them). pillar= a dict merged over it.

CLI Example:

    halite '*' pillar.items`,
		run: pillarItems,
	},
	{
		name: "data", varargs: true, varkw: true,
		doc: "Alias of pillar.items.\n\nCLI Example:\n\n    halite '*' pillar.data",
		run: pillarItems,
	},
	{
		name: "obfuscate", varargs: true, varkw: true,
		doc: `pillar.items with every value replaced by its type ("<str>"); mapping keys
are kept.

CLI Example:

    halite '*' pillar.obfuscate`,
		run: func(ctx context.Context, c *call) (any, error) {
			v, err := pillarItems(ctx, c)
			if err != nil {
				return nil, err
			}
			return obfuscate(v), nil
		},
	},
	{
		name: "ls", varargs: true,
		doc: `Ask the master for this device's pillar and list its top keys.

CLI Example:

    halite '*' pillar.ls`,
		run: func(ctx context.Context, c *call) (any, error) {
			v, err := pillarItems(ctx, &call{e: c.e, fun: c.fun, rest: c.rest, kw: map[string]any{}})
			if err != nil {
				return nil, err
			}
			m, _ := v.(map[string]any)
			out := make([]any, 0, len(m))
			for _, k := range sortedKeys(m) {
				out = append(out, k)
			}
			return out, nil
		},
	},
	{
		name: "item", varargs: true, varkw: true,
		doc: `Return the named pillar values as a dict of key to value (default=, ""
unless given, for a missing one; delimiter= for nested keys).

CLI Example:

    halite '*' pillar.item foo bar:baz`,
		run: func(_ context.Context, c *call) (any, error) {
			delim := saltdata.DefaultDelimiter
			if d, ok := c.kw["delimiter"]; ok {
				s, ok := d.(string)
				if !ok {
					return nil, invalidf("delimiter must be a string, not %v", d)
				}
				delim = s
			}
			def, ok := c.kw["default"]
			if !ok {
				def = ""
			}
			p := c.e.pillarData()
			out := make(map[string]any, len(c.rest))
			for _, a := range c.rest {
				key, ok := toString(a)
				if !ok {
					return nil, invalidf("pillar key %v is not a string", a)
				}
				if v, ok := saltdata.Traverse(p, key, delim); ok {
					out[key] = v
				} else {
					out[key] = def
				}
			}
			return out, nil
		},
	},
	{
		name:   "raw",
		params: []param{{name: "key"}},
		doc: `Return the pillar in memory, or its top-level key (an empty dict when
missing).

CLI Example:

    halite '*' pillar.raw
    halite '*' pillar.raw key=roles`,
		run: func(_ context.Context, c *call) (any, error) {
			p := c.e.pillarData()
			if k := c.arg("key"); k != nil && k != "" {
				key, _ := toString(k)
				if v, ok := p[key]; ok {
					return v, nil
				}
				return map[string]any{}, nil
			}
			return p, nil
		},
	},
	{
		name:   "keys",
		params: []param{{name: "key", required: true}, {name: "delimiter", def: saltdata.DefaultDelimiter}},
		doc: `List the keys of the pillar dict at key (an error when it is missing or not
a dict).

CLI Example:

    halite '*' pillar.keys web:sites`,
		run: func(_ context.Context, c *call) (any, error) {
			key, _, err := c.str("key")
			if err != nil {
				return nil, err
			}
			delim, _, err := c.str("delimiter")
			if err != nil {
				return nil, err
			}
			v, ok := saltdata.Traverse(c.e.pillarData(), key, delim)
			if !ok {
				return nil, commandf("Pillar key not found: %s", key)
			}
			m, ok := v.(map[string]any)
			if !ok {
				return nil, commandf("Pillar value in key %s is not a dict", key)
			}
			out := make([]any, 0, len(m))
			for _, k := range sortedKeys(m) {
				out = append(out, k)
			}
			return out, nil
		},
	},
}}

func init() { register(modpillarModule) }

// pillarData is the pillar in memory (empty without one).
func (e *Executor) pillarData() map[string]any {
	if e.pillar == nil {
		return map[string]any{}
	}
	if p := e.pillar(); p != nil {
		return p
	}
	return map[string]any{}
}

// pillarGet is Salt's pillar.get (salt/modules/pillar.py get).
func pillarGet(ctx context.Context, c *call) (any, error) {
	key, _, err := c.str("key")
	if err != nil {
		return nil, err
	}
	delim, _, err := c.str("delimiter")
	if err != nil {
		return nil, err
	}
	if c.arg("pillarenv") != nil {
		return nil, commandf("pillar.get: pillarenv= is not available on this agent (its pillar is the one the master compiled for it)")
	}
	def := c.arg("default")
	raise := false
	if def == notSet {
		if isTrue(c.e.opts["pillar_raise_on_missing"]) {
			raise = true
		}
		def = ""
	}
	mergeLists := isTrue(c.e.opts["pillar_merge_lists"])
	if v := c.arg("merge_nested_lists"); v != nil {
		mergeLists = isTrue(v)
	}
	p := c.e.pillarData()
	if c.arg("saltenv") != nil {
		// Salt compiles a fresh pillar for saltenv= (which then matters
		// only with pillarenv_from_saltenv).
		if p, err = c.e.freshPillar(ctx); err != nil {
			return nil, err
		}
	}
	if isTrue(c.arg("merge")) {
		switch d := def.(type) {
		case map[string]any:
			v, _ := saltdata.Traverse(p, key, delim)
			if m, ok := v.(map[string]any); ok {
				return dictUpdate(deepCopy(d).(map[string]any), m, mergeLists), nil
			}
			c.e.log.Error(fmt.Sprintf("pillar.get: Default (%v) is a dict, but the returned pillar value (%v) is of type '%s'. Merge will be skipped.", d, v, typeName(v)))
		case []any:
			v, _ := saltdata.Traverse(p, key, delim)
			if l, ok := v.([]any); ok {
				return appendNew(deepCopy(d).([]any), l), nil
			}
			c.e.log.Error(fmt.Sprintf("pillar.get: Default (%v) is a list, but the returned pillar value (%v) is of type '%s'. Merge will be skipped.", d, v, typeName(v)))
		default:
			c.e.log.Error(fmt.Sprintf("pillar.get: Default (%v) is of type '%s', must be a dict or list to merge. Merge will be skipped.", d, typeName(d)))
		}
	}
	if v, ok := saltdata.Traverse(p, key, delim); ok {
		return v, nil
	}
	if raise {
		return nil, commandf("Pillar key not found: %s", key)
	}
	return def, nil
}

// pillarItems is Salt's pillar.items: names given, pillar.item of them;
// else a fresh pillar from the master, with pillar= merged over it.
func pillarItems(ctx context.Context, c *call) (any, error) {
	if len(c.rest) > 0 {
		p := c.e.pillarData()
		out := make(map[string]any, len(c.rest))
		for _, a := range c.rest {
			key, _ := toString(a)
			v, ok := saltdata.Traverse(p, key, saltdata.DefaultDelimiter)
			if !ok {
				v = ""
			}
			out[key] = v
		}
		return out, nil
	}
	if c.kw["pillarenv"] != nil {
		return nil, commandf("pillar.items: pillarenv= is not available on this agent (its pillar is the one the master compiled for it)")
	}
	if c.kw["pillar_enc"] != nil {
		return nil, commandf("pillar.items: pillar_enc= is not supported")
	}
	p, err := c.e.freshPillar(ctx)
	if err != nil {
		return nil, err
	}
	switch o := c.kw["pillar"].(type) {
	case nil:
	case map[string]any:
		p = dictUpdate(deepCopy(p).(map[string]any), o, isTrue(c.e.opts["pillar_merge_lists"]))
	default:
		return nil, invalidf("Pillar data must be formatted as a dictionary")
	}
	return p, nil
}

// freshPillar asks the master for the pillar (Options.FetchPillar), or is
// the one in memory when there is no master to ask.
func (e *Executor) freshPillar(ctx context.Context) (map[string]any, error) {
	if e.fetchPillar == nil {
		return e.pillarData(), nil
	}
	p, err := e.fetchPillar(ctx)
	if err != nil {
		return nil, commandf("%v", err)
	}
	return p, nil
}

// refreshPillar is saltutil.refresh_pillar (salt/modules/saltutil.py).
func refreshPillar(ctx context.Context, c *call) (any, error) {
	timeout, err := c.seconds("timeout")
	if err != nil {
		return nil, err
	}
	if c.e.refreshPillar == nil {
		return true, nil // no agent, no pillar in memory: nothing to refresh
	}
	return c.e.refreshPillar(ctx, isTrue(c.arg("wait")), timeout, isTrue(c.arg("clean_cache"))), nil
}

// dictUpdate is salt.utils.dictupdate.update: upd merged into dest
// (changed and returned), dicts recursively, lists appended (new items
// only) when mergeLists, else replaced.
func dictUpdate(dest, upd map[string]any, mergeLists bool) map[string]any {
	for k, v := range upd {
		switch dv := dest[k].(type) {
		case map[string]any:
			if uv, ok := v.(map[string]any); ok {
				dest[k] = dictUpdate(dv, uv, mergeLists)
				continue
			}
		case []any:
			if uv, ok := v.([]any); ok && mergeLists {
				dest[k] = appendNew(deepCopy(dv).([]any), uv)
				continue
			}
		}
		dest[k] = v
	}
	return dest
}

// appendNew appends the items of add that list does not hold.
func appendNew(list, add []any) []any {
	for _, x := range add {
		found := false
		for _, y := range list {
			if reflect.DeepEqual(x, y) {
				found = true
				break
			}
		}
		if !found {
			list = append(list, x)
		}
	}
	return list
}

// obfuscate is Salt's _obfuscate_inner: leaves become "<type>".
func obfuscate(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = obfuscate(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = obfuscate(e)
		}
		return out
	}
	return "<" + typeName(v) + ">"
}
