package exec

import (
	"context"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// modgrainsModule is the grains functions of modgrains.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modgrainsModule = module{name: "grains", funcs: []function{
	{
		name:   "items",
		params: []param{{name: "sanitize", def: false}},
		doc: `Return all of the agent's grains.

CLI Example:

    halite '*' grains.items`,
		run: func(_ context.Context, c *call) (any, error) { return c.e.grains.Get(), nil },
	},
	{
		name: "get",
		params: []param{{name: "key", required: true}, {name: "default", def: ""},
			{name: "delimiter", def: saltdata.DefaultDelimiter}, {name: "ordered", def: true}},
		doc: `Return the grain named key, or default ("" unless given) when it is
missing. Nested grains are reached with a delimited key (":" by default):

    halite '*' grains.get ip_interfaces:eth0
    halite '*' grains.get pkg:apache default=httpd
    halite '*' grains.get abc|def delimiter='|'`,
		run: func(_ context.Context, c *call) (any, error) {
			key, _, err := c.str("key")
			if err != nil {
				return nil, err
			}
			delim, _, err := c.str("delimiter")
			if err != nil {
				return nil, err
			}
			if v, ok := saltdata.Traverse(c.e.grains.Get(), key, delim); ok {
				return v, nil
			}
			return c.arg("default"), nil
		},
	},
	{
		name:    "item",
		varargs: true,
		varkw:   true,
		doc: `Return the named grains as a dict of key to value; a missing grain
is "" (or default=...). Nested keys and delimiter= work as in grains.get.

CLI Example:

    halite '*' grains.item os osrelease oscodename`,
		run: grainsItem,
	},
	{
		name: "ls",
		doc: `Return the names of all grains, sorted.

CLI Example:

    halite '*' grains.ls`,
		run: func(_ context.Context, c *call) (any, error) {
			keys := sortedKeys(c.e.grains.Get())
			out := make([]any, len(keys))
			for i, k := range keys {
				out[i] = k
			}
			return out, nil
		},
	},
}}

func init() { register(modgrainsModule) }

func grainsItem(_ context.Context, c *call) (any, error) {
	def, ok := c.kw["default"]
	if !ok {
		def = ""
	}
	delim := saltdata.DefaultDelimiter
	if d, ok := c.kw["delimiter"]; ok {
		s, ok := toString(d)
		if !ok {
			return nil, invalidf("delimiter must be a string, not %v", d)
		}
		delim = s
	}
	g := c.e.grains.Get()
	out := make(map[string]any, len(c.rest))
	for _, a := range c.rest {
		key, ok := toString(a)
		if !ok {
			return nil, invalidf("grain names must be strings, not %v", a)
		}
		if v, ok := saltdata.Traverse(g, key, delim); ok {
			out[key] = v
		} else {
			out[key] = def
		}
	}
	return out, nil
}
