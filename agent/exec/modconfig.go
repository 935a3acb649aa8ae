package exec

import (
	"context"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// config.get after salt/modules/config.py. The pillar store is the pillar
// in memory (Options.Pillar); the master-pillar store is empty, and none of the module
// defaults of Salt's DEFAULTS (mongo.*, solr.*, ...) exist here; sdb://
// values are returned as they are.

// modconfigModule is the config functions of modconfig.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modconfigModule = module{name: "config", funcs: []function{
	{
		name: "get",
		params: []param{{name: "key", required: true}, {name: "default", def: ""}, {name: "delimiter", def: saltdata.DefaultDelimiter},
			{name: "merge"}, {name: "omit_opts", def: false}, {name: "omit_pillar", def: false},
			{name: "omit_master", def: false}, {name: "omit_grains", def: false}},
		doc: `Return the value of key from the agent's options, else its grains,
else the pillar; default ("" unless given) when none
has it. Nested values are reached with a delimited key (":"). merge=recurse
or merge=overwrite searches the stores merged (options over grains) instead.
omit_opts, omit_grains, omit_pillar and omit_master skip a store.

CLI Example:

    halite '*' config.get master
    halite '*' config.get pkg:apache default=httpd
    halite '*' config.get roles merge=recurse`,
		run: configGet,
	},
}}

func init() { register(modconfigModule) }

func configGet(_ context.Context, c *call) (any, error) {
	key, err := c.need("key")
	if err != nil {
		return nil, err
	}
	delim, err := c.need("delimiter")
	if err != nil {
		return nil, err
	}
	opts := c.e.opts
	if opts == nil {
		opts = map[string]any{}
	}
	g := c.e.grains.Get()
	if c.arg("merge") == nil {
		stores := []struct {
			omit string
			data map[string]any
		}{{"omit_opts", opts}, {"omit_grains", g}, {"omit_pillar", c.e.pillarData()}}
		for _, s := range stores {
			if isTrue(c.arg(s.omit)) {
				continue
			}
			if v, ok := saltdata.Traverse(s.data, key, delim); ok {
				return v, nil
			}
		}
		return c.arg("default"), nil
	}
	strategy, _ := toString(c.arg("merge"))
	if strategy != "recurse" && strategy != "overwrite" {
		c.e.log.Warn("unsupported merge strategy; falling back to recurse", zap.Reflect("merge", c.arg("merge")))
		strategy = "recurse"
	}
	// Salt merges DEFAULTS, the master pillar, the pillar, the grains, then
	// the options; the first two are empty here.
	data := map[string]any{}
	for _, m := range []map[string]any{c.e.pillarData(), g, opts} {
		data = mergeDicts(data, m, strategy == "recurse")
	}
	if v, ok := saltdata.Traverse(data, key, delim); ok {
		return v, nil
	}
	return c.arg("default"), nil
}

// mergeDicts is salt.utils.dictupdate.merge with the recurse (recursive)
// or overwrite strategy: upd's keys over dest's, dicts merged down when
// recursive, lists replaced. It builds new maps and never changes its
// arguments.
func mergeDicts(dest, upd map[string]any, recursive bool) map[string]any {
	out := make(map[string]any, len(dest)+len(upd))
	for k, v := range dest {
		out[k] = v
	}
	for k, v := range upd {
		if recursive {
			dv, ok1 := out[k].(map[string]any)
			uv, ok2 := v.(map[string]any)
			if ok1 && ok2 {
				out[k] = mergeDicts(dv, uv, true)
				continue
			}
		}
		out[k] = v
	}
	return out
}
