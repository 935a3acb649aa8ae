package exec

import (
	"context"
	"fmt"
)

// modsaltutilModule is the saltutil functions of modsaltutil.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modsaltutilModule = module{name: "saltutil", funcs: []function{
	{
		name: "running",
		doc: `Return the jobs running on the agent (other than this one), each as
{jid, fun, arg, pid, tgt, tgt_type, user, ret}.

CLI Example:

    halite '*' saltutil.running`,
		run: func(_ context.Context, c *call) (any, error) { return c.e.running(c.job), nil },
	},
	{
		name:   "find_job",
		params: []param{{name: "jid", required: true}},
		doc: `Return the data of the running job jid, or {} when it is not running.

CLI Example:

    halite '*' saltutil.find_job <job id>`,
		run: func(_ context.Context, c *call) (any, error) {
			jid, _, err := c.str("jid")
			if err != nil {
				return nil, err
			}
			for _, d := range c.e.running(c.job) {
				if m := d.(map[string]any); m["jid"] == jid {
					return m, nil
				}
			}
			return map[string]any{}, nil
		},
	},
	{
		name:   "kill_job",
		params: []param{{name: "jid", required: true}},
		doc: `Kill the running job jid: its context is cancelled and any command
it runs is killed with its whole process group. Returns "Signal 9 sent to job
<jid> at pid <pid>", or "" when no such job is running.

CLI Example:

    halite '*' saltutil.kill_job <job id>`,
		run: func(_ context.Context, c *call) (any, error) {
			jid, _, err := c.str("jid")
			if err != nil {
				return nil, err
			}
			if c.e.kill(jid, c.job) == 0 {
				return "", nil
			}
			return fmt.Sprintf("Signal 9 sent to job %s at pid %d", jid, c.e.pid), nil
		},
	},
	{
		name:   "refresh_pillar",
		params: []param{{name: "wait", def: false}, {name: "timeout", def: 30}, {name: "clean_cache", def: true}},
		doc: `Refresh the pillar in memory from the master: fires "pillar_refresh" on
the agent's bus, then "/salt/minion/minion_pillar_refresh_complete"
({"complete": bool}) when the pillar came. wait=True returns when it did,
or after timeout seconds. Returns True.

CLI Example:

    halite '*' saltutil.refresh_pillar
    halite '*' saltutil.refresh_pillar wait=True timeout=60`,
		run: refreshPillar,
	},
	{
		name:   "pillar_refresh",
		params: []param{{name: "wait", def: false}, {name: "timeout", def: 30}, {name: "clean_cache", def: true}},
		doc:    "Alias of saltutil.refresh_pillar.\n\nCLI Example:\n\n    halite '*' saltutil.pillar_refresh",
		run:    refreshPillar,
	},
	{
		name:  "refresh_grains",
		varkw: true,
		doc: `Collect the grains again and send them to the master. Returns True.

CLI Example:

    halite '*' saltutil.refresh_grains`,
		run: func(_ context.Context, c *call) (any, error) {
			g := c.e.grains.Refresh()
			if c.e.onRefresh != nil {
				c.e.onRefresh(g)
			}
			return true, nil
		},
	},
	{
		name: "sync_grains",
		params: []param{{name: "saltenv"}, {name: "refresh", def: true},
			{name: "extmod_whitelist"}, {name: "extmod_blacklist"}},
		doc: `Halite has no custom grains modules to sync: this re-reads the static
grains (the grains file and the grains: option) and collects the grains
again, then, unless refresh=False, sends them to the master. Returns the
list of modules synced, always [].

CLI Example:

    halite '*' saltutil.sync_grains`,
		run: func(_ context.Context, c *call) (any, error) {
			g := c.e.grains.Refresh()
			if isTrue(c.arg("refresh")) && c.e.onRefresh != nil {
				c.e.onRefresh(g)
			}
			return []any{}, nil
		},
	},
}}

func init() { register(modsaltutilModule) }
