package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
	_ "github.com/halite-fleet/halite/engines/forward"    // event_forward
	_ "github.com/halite-fleet/halite/engines/httpengine" // webhook, http_forward, metrics
	"github.com/halite-fleet/halite/engines/starlark"
	"github.com/halite-fleet/halite/master/api"
)

// Engines on the master: the engines: option runs in an engines.Manager
// with every built-in engine (the master can afford net/http and the
// message-bus clients), the master-only stalekey engine, and user engines
// from _engines/ under file_roots (base), Starlark or executable, which are
// looked up again every engineRefresh so an edited file restarts its
// engines. saltutil.sync_engines and sync_all jobs carry those files to
// the agents (syncKwargs).

// engineRefresh is how often the master looks at its _engines/ files.
const engineRefresh = 10 * time.Second

// engineRoots are the directories holding the master's user engines.
func (m *Master) engineRoots() []string {
	var out []string
	for _, r := range m.cfg.FileRoots["base"] {
		out = append(out, filepath.Join(r, "_engines"))
	}
	return out
}

// masterEngines is the master's engines part: the engines.Manager, run
// with a look at the user engine files every engineRefresh.
type masterEngines struct {
	mgr *engines.Manager
}

// newEngines checks the engines: option; called by New, so a bad option
// stops the master at start with the engine's name and the option.
func newEngines(m *Master) (*masterEngines, error) {
	mgr, err := engines.New(engines.Options{
		Config: m.cfg.Engines,
		Env: engines.Env{
			Role: "master", ID: m.name, Bus: m.bus, Fire: m.bus.Publish, Config: m.cfg.Raw,
			Figures: m.figures,
			// On the master, call() runs runners (manage.up, jobs.lookup_jid, …),
			// as Salt's master engines have __runners__.
			Call: func(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
				return m.runRunner(ctx, &api.Request{Fun: fun, Arg: args, Kwarg: kwargs, User: "engine"})
			},
		},
		Extra:  map[string]engines.Factory{"stalekey": m.stalekeyFactory},
		Lookup: engines.UserDir{Dirs: m.engineRoots(), Script: starlark.Compile}.Lookup,
		Log:    m.log.Named("engines"),
	})
	if err != nil {
		return nil, err
	}
	return &masterEngines{mgr: mgr}, nil
}

// Run runs the engines until ctx ends, looking at the user engine files
// again every engineRefresh. It runs with none configured too, so that
// Reload can add some.
func (e *masterEngines) Run(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- e.mgr.Run(ctx) }()
	t := time.NewTicker(engineRefresh)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			e.mgr.Refresh()
		}
	}
}

// figures are the master's counters for the metrics engine.
func (m *Master) figures() map[string]float64 {
	out := map[string]float64{"halite_minions_connected": float64(len(m.minions.connected()))}
	for _, st := range m.engines.mgr.Status() {
		out["halite_engine_restarts_total{engine=\""+st.Name+"\"}"] = float64(st.Restarts)
	}
	return out
}

// syncKwargs returns a job's kwargs with the user engine files attached
// (key __engines) when the job syncs engines; the job is signed, so the
// agents know the files come from their master, and each file carries its
// SHA-256, checked before it is written.
func (m *Master) syncKwargs(req *api.Request) (map[string]any, error) {
	if req.Fun != "saltutil.sync_engines" && req.Fun != "saltutil.sync_all" {
		return req.Kwarg, nil
	}
	files, err := engines.Collect(m.cfg.FileRoots["base"], m.log.Named("engines"))
	if err != nil {
		return nil, &api.RemoteError{Code: api.CodeBadRequest, Msg: err.Error()}
	}
	kw := make(map[string]any, len(req.Kwarg)+1)
	for k, v := range req.Kwarg {
		kw[k] = v
	}
	kw["__engines"] = engines.FilesToWire(files)
	return kw, nil
}

// The stalekey engine (Salt's stalekey): every interval seconds (default
// 3600) it records which minions are connected, and deletes the accepted
// keys of minions not seen for expire hours (default 24), firing salt/key
// {act: delete} for each. Last-seen times are kept in
// cachedir/engines/stalekey.json, so a master restart does not forget them.
//
//	engines:
//	  - stalekey:
//	      interval: 3600
//	      expire: 24
func (m *Master) stalekeyFactory(o *engines.Opts) (engines.Engine, error) {
	interval, err := o.Seconds("interval", time.Hour)
	if err != nil {
		return nil, err
	}
	expire, err := o.Seconds("expire", 24*time.Second) // a count of hours, see below
	if err != nil {
		return nil, err
	}
	// expire is in hours, as Salt's; Seconds read it as a count.
	expireDur := time.Duration(float64(expire) * 3600)
	return engines.EngineFunc(func(ctx context.Context, env *engines.Env) error {
		file := filepath.Join(m.cfg.CacheDir, "engines", "stalekey.json")
		seen := map[string]time.Time{}
		if b, err := os.ReadFile(file); err == nil {
			if err := json.Unmarshal(b, &seen); err != nil {
				env.Log.Warn("stalekey state unreadable; starting over", zap.String("file", file), zap.Error(err))
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read %s: %w", file, err)
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := m.stalekeyPass(env, seen, expireDur, file); err != nil {
				env.Log.Warn("stalekey pass", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}), nil
}

func (m *Master) stalekeyPass(env *engines.Env, seen map[string]time.Time, expire time.Duration, file string) error {
	now := time.Now()
	keys, err := m.keys.List()
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	accepted := map[string]bool{}
	for _, id := range keys["minions"] {
		accepted[id] = true
		if _, ok := seen[id]; !ok {
			seen[id] = now // first sight: the clock starts now, as Salt's does
		}
	}
	for _, id := range m.minions.connected() {
		seen[id] = now
	}
	var stale []string
	for id, t := range seen {
		if !accepted[id] {
			delete(seen, id)
			continue
		}
		if now.Sub(t) > expire {
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	for _, id := range stale {
		if err := m.deleteKey(id); err != nil {
			env.Log.Warn("stalekey: delete key", zap.String("id", id), zap.Error(err))
			continue
		}
		delete(seen, id)
		env.Log.Info("stalekey: deleted the key of a minion not seen", zap.String("id", id), zap.Duration("for", expire))
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(seen)
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
