package master

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/batch"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/reactor"
	"github.com/halite-fleet/halite/render"
)

// The master's reactor: the `reactor:` option's rules run local, runner and
// wheel reactions; jobs it starts carry user "Reactor". It is one of the
// master's parts (Master.reactor, started by Run) and offers the
// reactor.list, reactor.add and reactor.delete runners.

// ReactorUser is the user of every job, runner and wheel call the reactor
// starts (Salt's event_user).
const ReactorUser = "Reactor"

// defaultReactorRefresh is reactor_refresh_interval's default, in seconds.
const defaultReactorRefresh = 60

// masterReactor is the master's reactor part: the reactor engine, the
// rules it reloads, and what it needs from the master (its options, bus and
// log; dispatch runs each reaction).
type masterReactor struct {
	cfg      *config.Master
	bus      *event.Bus
	log      *zap.Logger
	dispatch func(context.Context, *reactor.Reaction) (string, error)

	engine atomic.Pointer[reactor.Engine] // set while Run runs
	confMu sync.Mutex
	conf   string // config dir to reload the rules from, "" if unknown
}

func newReactor(cfg *config.Master, bus *event.Bus, log *zap.Logger,
	dispatch func(context.Context, *reactor.Reaction) (string, error)) *masterReactor {
	return &masterReactor{cfg: cfg, bus: bus, log: log, dispatch: dispatch}
}

// SetConfigDir tells the master where its configuration lives, so that the
// reactor can reload its rules on SIGHUP and every
// reactor_refresh_interval seconds. Call it before Run.
func (m *Master) SetConfigDir(dir string) {
	r := m.reactor
	r.confMu.Lock()
	r.conf = dir
	r.confMu.Unlock()
}

// ReactorEngine returns the master's reactor once Run started it.
func (m *Master) ReactorEngine() *reactor.Engine {
	if m.reactor == nil {
		return nil
	}
	return m.reactor.engine.Load()
}

// funcs are the "salt" functions reactor templates may call: quick,
// local and side-effect free, as Salt advises.
func (r *masterReactor) funcs() map[string]any {
	return map[string]any{
		"test.ping": func() bool { return true },
		"test.echo": func(s any) any { return s },
		// Reactor files have no pillar (Salt's docs); pillar.get gives the
		// default.
		"pillar.get": func(key string, def ...any) any { return first(def) },
		"config.get": func(key string, def ...any) any {
			if v, ok := r.cfg.Raw[key]; ok {
				return v
			}
			return first(def)
		},
		"config.option": func(key string, def ...any) any {
			if v, ok := r.cfg.Raw[key]; ok {
				return v
			}
			return first(def)
		},
	}
}

func first(v []any) any {
	if len(v) > 0 {
		return v[0]
	}
	return ""
}

func (r *masterReactor) rules(cfg *config.Master) []reactor.Rule {
	rules, err := reactor.ParseConfig(cfg.Reactor)
	if err != nil {
		r.log.Error("reactor option ignored", zap.Error(err))
		return nil
	}
	return rules
}

// Run runs the reactor engine until ctx ends, and returns once the engine
// and the loop reloading its rules have exited.
func (r *masterReactor) Run(ctx context.Context) error {
	defer r.engine.Store(nil)
	e := reactor.New(reactor.Options{
		Rules:    r.rules(r.cfg),
		Files:    reactor.Files{Roots: r.cfg.FileRoots},
		Renderer: render.New(render.Options{Funcs: r.funcs()}),
		Dispatch: r.dispatch,
		Types:    []string{reactor.TypeLocal, reactor.TypeRunner, reactor.TypeWheel},
		Fire:     r.bus.Publish,
		Workers:  r.cfg.ReactorWorkerThreads,
		Queue:    r.cfg.ReactorWorkerHwm,
		MaxDepth: r.cfg.ReactorMaxDepth,
		Log:      r.log.Named("reactor"),
	})
	r.engine.Store(e)
	if n := len(e.Rules()); n > 0 {
		r.log.Info("reactor running", zap.Int("rules", n), zap.Int("workers", r.cfg.ReactorWorkerThreads))
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.reloadLoop(ctx, done)
	}()
	err := e.Run(ctx, r.bus)
	close(done)
	wg.Wait()
	return err
}

// reloadLoop rereads the reactor rules from the configuration on SIGHUP
// and every reactor_refresh_interval seconds, when the config directory is
// known.
func (r *masterReactor) reloadLoop(ctx context.Context, done <-chan struct{}) {
	r.confMu.Lock()
	dir := r.conf
	r.confMu.Unlock()
	if dir == "" {
		return
	}
	interval := r.cfg.ReactorRefreshInterval
	if interval <= 0 {
		interval = defaultReactorRefresh
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	t := time.NewTicker(time.Duration(interval) * time.Second)
	defer t.Stop()
	last := fmt.Sprint(r.engine.Load().Rules())
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-hup:
		case <-t.C:
		}
		cfg, err := config.LoadMaster(dir, func(config.Warning) {})
		if err != nil {
			r.log.Error("reactor reload: configuration unreadable, rules kept", zap.Error(err))
			continue
		}
		rules := r.rules(cfg)
		if s := fmt.Sprint(rules); s != last {
			r.engine.Load().SetRules(rules)
			last = s
			r.log.Info("reactor rules reloaded", zap.Int("rules", len(rules)))
		}
	}
}

// dispatchReaction runs one reaction as user Reactor and returns the job id
// of the call it started.
func (m *Master) dispatchReaction(ctx context.Context, r *reactor.Reaction) (string, error) {
	switch r.Type {
	case reactor.TypeLocal:
		return m.reactLocal(ctx, r)
	case reactor.TypeRunner:
		fn, ok := m.runners()[r.Fun]
		if !ok {
			return "", fmt.Errorf("runner %s is not available", r.Fun)
		}
		return m.reactCall(ctx, "run", r, fn)
	case reactor.TypeWheel:
		fn, ok := m.wheel()[r.Fun]
		if !ok {
			return "", fmt.Errorf("wheel %s is not available", r.Fun)
		}
		return m.reactCall(ctx, "wheel", r, fn)
	}
	return "", fmt.Errorf("%s reactions do not run on the master", r.Type)
}

func (m *Master) reactLocal(ctx context.Context, r *reactor.Reaction) (string, error) {
	req := &api.Request{
		Op: api.OpPublish, Fun: r.Fun, Arg: r.Arg, Kwarg: r.Kwarg, Tgt: r.Tgt, TgtType: r.TgtType,
		Ret: r.Ret, Timeout: r.Timeout, User: ReactorUser, Async: true,
	}
	if d, ok := r.Options["delimiter"].(string); ok {
		req.Delimiter = d
	}
	if len(req.Kwarg) == 0 {
		req.Kwarg = nil
	}
	if r.Batch != "" {
		return m.reactBatch(ctx, r, req)
	}
	jid := m.jids.Next()
	r.Claim(jid)
	_, saved, err := m.publishQueued(jid, req)
	if saved != nil {
		// The worker goes on while the load's commit is under way: jobs
		// published at once share commits, and reactor_worker_threads
		// bounds the reactions being rendered and sent, not the commits
		// waited for. The wait is tracked so that Run returns after it.
		m.loadWG.Add(1)
		go func() {
			defer m.loadWG.Done()
			m.loadSaved(jid, saved)
		}()
	}
	if err != nil {
		return "", err
	}
	return jid, nil
}

// reactBatch runs a local reaction on its targets a batch at a time
// (batch: N or N%), rolling as salt --batch does (package batch, which
// the CLI and orchestrate share): at most N minions run the job at once,
// and each return frees a slot. It returns the first batch's job id.
func (m *Master) reactBatch(ctx context.Context, r *reactor.Reaction, req *api.Request) (string, error) {
	if err := batch.Check(strings.TrimSpace(r.Batch)); err != nil {
		return "", err
	}
	minions, err := m.expected(req.Tgt, req.TgtType, req.Delimiter)
	if err != nil {
		return "", err
	}
	var connected []string
	for _, id := range minions {
		if m.minions.session(id) != nil {
			connected = append(connected, id)
		}
	}
	var firstJID string
	start := func(ctx context.Context, ids []string, ret func(string, map[string]any)) error {
		b := *req
		b.Tgt, b.TgtType, b.Delimiter, b.Async = strings.Join(ids, ","), "list", "", false
		jid, _, err := orchHost{m}.cmdJID(ctx, &b, r.Claim, func(d map[string]any) {
			id, _ := d["id"].(string)
			ret(id, d)
		})
		if firstJID == "" {
			firstJID = jid
		}
		return err
	}
	_, err = batch.Run(ctx, connected, batch.Options{Size: strings.TrimSpace(r.Batch)}, start, batch.Hooks{})
	return firstJID, err
}

// reactCall runs a runner or wheel function for the reactor, firing
// salt/<kind>/<jid>/new and /ret as a CLI call does.
func (m *Master) reactCall(ctx context.Context, kind string, r *reactor.Reaction, fn callFunc) (string, error) {
	jid := m.jids.Next()
	r.Claim(jid)
	req := &api.Request{Fun: r.Fun, Arg: r.Arg, Kwarg: r.Kwarg, User: ReactorUser}
	m.bus.Publish("salt/"+kind+"/"+jid+"/new", callEvent(kind, r.Fun, jid, ReactorUser, r.Arg, r.Kwarg))
	res, err := safeCall(ctx, req, fn)
	m.bus.Publish("salt/"+kind+"/"+jid+"/ret", callRetEvent(kind, r.Fun, jid, ReactorUser, r.Arg, r.Kwarg, res, err))
	return jid, err
}

// reactorRunners are reactor.list, reactor.add and reactor.delete, as
// Salt's reactor runner module.
func reactorRunners(m *Master) map[string]callFunc {
	engine := func() (*reactor.Engine, error) {
		e := m.ReactorEngine()
		if e == nil {
			return nil, badRequest("the reactor is not running")
		}
		return e, nil
	}
	return map[string]callFunc{
		"reactor.list": func(context.Context, *api.Request) (any, error) {
			e, err := engine()
			if err != nil {
				return nil, err
			}
			out := []any{}
			for _, r := range e.Rules() {
				out = append(out, map[string]any{r.Tag: toAnyList(r.Files)})
			}
			return out, nil
		},
		"reactor.add": func(_ context.Context, req *api.Request) (any, error) {
			e, err := engine()
			if err != nil {
				return nil, err
			}
			a := &args{req: req}
			tag, err := a.str(0, "event", true)
			if err != nil {
				return nil, err
			}
			v, ok := a.get(1, "reactors")
			if !ok {
				return nil, badRequest("reactor.add: missing required argument \"reactors\"")
			}
			var files []string
			switch v := v.(type) {
			case string:
				for _, f := range strings.Split(v, ",") {
					if f = strings.TrimSpace(f); f != "" {
						files = append(files, f)
					}
				}
			case []any:
				for _, f := range v {
					files = append(files, fmt.Sprint(f))
				}
			default:
				return nil, badRequest("reactor.add: reactors must be a file or a list of files, got %T", v)
			}
			if len(files) == 0 {
				return nil, badRequest("reactor.add: no reactor files given")
			}
			e.Add(tag, files)
			return map[string]any{"status": true, "comment": "Reactor added."}, nil
		},
		"reactor.delete": func(_ context.Context, req *api.Request) (any, error) {
			e, err := engine()
			if err != nil {
				return nil, err
			}
			a := &args{req: req}
			tag, err := a.str(0, "event", true)
			if err != nil {
				return nil, err
			}
			if !e.Delete(tag) {
				return map[string]any{"status": false, "comment": "Reactor " + tag + " not found."}, nil
			}
			return map[string]any{"status": true, "comment": "Reactor deleted."}, nil
		},
	}
}
