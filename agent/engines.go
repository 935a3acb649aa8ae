package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/engines"
)

// Engines on the agent: the engines: option runs in an engines.Manager.
// The default agent has the script engine and executable (JSON-lines)
// user engines; Starlark user engines need a build with -tags starlark
// (engines_starlark.go), and the engines that use net/http or message-bus
// clients (webhook, http_forward, metrics, event_forward) -tags engines
// (engines_net.go), to keep the default armv7 binary under 8 MiB.
//
// User engines are synced from the master's file_roots _engines/ by
// saltutil.sync_engines (or sync_all) into cachedir/extmods/engines, with
// a manifest of SHA-256 sums checked before each start; a changed file
// restarts the engines using it.

// agentScript compiles Starlark engines; set by the starlark build tag.
var agentScript engines.ScriptCompiler

// engineHost is the agent's engine manager and its synced directory.
type engineHost struct {
	m   *engines.Manager
	dir string
}

// Run runs the engines until ctx ends.
func (h *engineHost) Run(ctx context.Context) error { return h.m.Run(ctx) }

func (a *Agent) engineDir() string { return filepath.Join(a.cfg.CacheDir, "extmods", "engines") }

// newEngines checks the engines: option; a bad option stops the agent at
// start with the engine's name and the option.
func (a *Agent) newEngines() (*engineHost, error) {
	dir := a.engineDir()
	m, err := engines.New(engines.Options{
		Config: a.cfg.Engines,
		Env: engines.Env{
			Role:   "agent",
			ID:     a.cfg.ID,
			Bus:    a.bus,
			Fire:   a.bus.Publish,
			Grains: a.grains.Get,
			Config: a.cfg.Raw,
			FireMaster: func(tag string, data map[string]any) error {
				if a.masterless() {
					a.bus.Publish(tag, data)
					return nil
				}
				return a.SendEvent(tag, data)
			},
			Call:    a.engineCall,
			Figures: a.figures,
		},
		Lookup: a.engineLookup(dir),
		Log:    a.log.Named("engines"),
	})
	if err != nil {
		return nil, err
	}
	return &engineHost{m: m, dir: dir}, nil
}

// engineLookup finds user engines: synced ones (checked against their
// manifest) and, on a masterless agent, those of its local file root
// (root_dir/srv/salt/_engines, Salt's masterless file_roots), which
// nothing syncs.
func (a *Agent) engineLookup(synced string) func(string) (engines.UserModule, error) {
	sync := engines.UserDir{Dirs: []string{synced}, Script: agentScript, Verified: true}
	if !a.masterless() {
		return sync.Lookup
	}
	local := engines.UserDir{Dirs: []string{filepath.Join(a.cfg.RootDir, "srv", "salt", "_engines")}, Script: agentScript}
	return func(module string) (engines.UserModule, error) {
		m, err := sync.Lookup(module)
		if errors.Is(err, engines.ErrNoModule) {
			return local.Lookup(module)
		}
		return m, err
	}
}

// engineCall runs an execution function for an engine.
func (a *Agent) engineCall(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	jid := fmt.Sprintf("%020d", time.Now().UnixMicro())
	res := a.exec.Run(ctx, exec.Request{JID: jid, Fun: fun, Args: args, Kwargs: kwargs, User: "engine"})
	if !res.Success {
		return nil, fmt.Errorf("%s failed (retcode %d): %v", fun, res.Retcode, res.Return)
	}
	return res.Return, nil
}

// figures are the agent's counters for the metrics engine.
func (a *Agent) figures() map[string]float64 {
	out := map[string]float64{}
	for name, st := range a.beacons.Stats() {
		out["halite_beacon_checks_total{beacon=\""+name+"\"}"] = float64(st.Checks)
		out["halite_beacon_events_total{beacon=\""+name+"\"}"] = float64(st.Events)
		out["halite_beacon_errors_total{beacon=\""+name+"\"}"] = float64(st.Errors)
	}
	for _, st := range a.engines.m.Status() {
		out["halite_engine_restarts_total{engine=\""+st.Name+"\"}"] = float64(st.Restarts)
	}
	return out
}

func init() {
	sync := func(_ context.Context, host any, req exec.Request) (any, error) {
		a, ok := host.(*Agent)
		if !ok || a.engines == nil {
			return nil, exec.ErrNoHost
		}
		raw, ok := req.Kwargs["__engines"]
		if !ok {
			return nil, exec.Commandf("the job carries no engine files: it must come from a master (halite '*' %s)", req.Fun)
		}
		files, err := engines.FilesFromWire(raw)
		if err != nil {
			return nil, exec.Commandf("%v", err)
		}
		changed, err := engines.Sync(a.engines.dir, files)
		var partial *engines.SyncError
		if err != nil && !errors.As(err, &partial) {
			return nil, exec.Commandf("%v", err)
		}
		a.engines.m.Refresh()
		if partial != nil {
			// The other files are synced; the job fails, naming the
			// files that are not.
			for name, ferr := range partial.Failed {
				a.log.Warn("engine file not synced", zap.String("file", name), zap.Error(ferr))
			}
			return nil, exec.Commandf("%v (synced: %v)", partial, changed)
		}
		out := make([]any, 0, len(changed))
		for _, c := range changed {
			out = append(out, c)
		}
		if req.Fun == "saltutil.sync_all" {
			return map[string]any{"engines": out}, nil
		}
		return out, nil
	}
	exec.Register("saltutil.sync_engines", `Sync the user engines of the master's file_roots (_engines/) to this agent,
check each file's SHA-256, and start or restart the configured engines that
use them. Returns the engines written or removed.

CLI Example:

    halite '*' saltutil.sync_engines`, sync)
	exec.Register("saltutil.sync_all", `Sync every kind of custom module the master has for agents; in Halite,
the user engines (see saltutil.sync_engines). Returns {"engines": [...]}.

CLI Example:

    halite '*' saltutil.sync_all`, sync)
}
