package engines

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
)

// UserModule is an engine module that is not built in: a user engine
// found by Options.Lookup (a synced or file_roots _engines file).
type UserModule struct {
	Factory Factory
	// Version changes when the module's code changes (its hash); the
	// Manager restarts the engines using it when it does.
	Version string
}

// ErrNoModule is returned by a Lookup that has no such module (yet).
var ErrNoModule = errors.New("no such engine module")

// Options configure a Manager.
type Options struct {
	Config []any // the engines: option
	Env    Env   // copied for each engine, with Name and Log set
	// Extra are built-in modules of this daemon only (the master's
	// stalekey); they take precedence over the registry.
	Extra map[string]Factory
	// Lookup finds a user engine module; nil: built-ins only. It returns
	// ErrNoModule when there is none, which is not an error at start: the
	// engine waits for a sync (Refresh).
	Lookup func(module string) (UserModule, error)
	Log    *zap.Logger
	// MinBackoff and MaxBackoff bound the wait before restarting a failed
	// engine (defaults 1 s and 60 s); the wait doubles after each failure
	// and starts over when the engine ran for a minute.
	MinBackoff, MaxBackoff time.Duration
}

// Status is one engine's state, for engines.list and the metrics engine.
type Status struct {
	Name, Module, Version string
	Running               bool
	Restarts              uint64
	LastError             string
}

// Manager runs the configured engines.
type Manager struct {
	o Options

	refresh chan struct{}

	mu     sync.Mutex
	specs  []Spec // the engines: option; replaced whole (Replace)
	status map[string]*Status
}

// New parses the engines: option and checks each built-in engine's options
// by making it once. A bad option is an error naming the engine and the
// option.
func New(o Options) (*Manager, error) {
	specs, err := ParseConfig(o.Config)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = 60 * time.Second
	}
	m := &Manager{o: o, specs: specs, refresh: make(chan struct{}, 1), status: map[string]*Status{}}
	for _, s := range specs {
		m.status[s.Name] = &Status{Name: s.Name, Module: s.Module}
	}
	if err := m.check(specs); err != nil {
		return nil, err
	}
	return m, nil
}

// check makes each built-in engine of specs once, to check its options.
func (m *Manager) check(specs []Spec) error {
	for _, s := range specs {
		f, _, err := m.factory(s.Module)
		if errors.Is(err, ErrNoModule) {
			if m.o.Lookup == nil {
				return fmt.Errorf("engine %s: no engine module %q (built in: %v)", s.Name, s.Module, m.builtins())
			}
			m.o.Log.Warn("engine module not found yet; the engine starts when it appears (master: file_roots _engines/; agent: saltutil.sync_engines)",
				zap.String("engine", s.Name), zap.String("module", s.Module))
			continue
		}
		if err != nil {
			return fmt.Errorf("engine %s: %w", s.Name, err)
		}
		if _, err := build(f, s); err != nil {
			return err
		}
	}
	return nil
}

// Check checks an engines: option as New does, changing nothing.
func (m *Manager) Check(cfg []any) error {
	specs, err := ParseConfig(cfg)
	if err != nil {
		return err
	}
	return m.check(specs)
}

// Replace makes cfg the engines: option (a configuration reloaded): once
// it checks as New checks it, the engines it no longer lists stop, those
// whose options or module changed restart, new ones start, and the others
// run on undisturbed. A bad cfg is an error and changes nothing.
func (m *Manager) Replace(cfg []any) error {
	specs, err := ParseConfig(cfg)
	if err != nil {
		return err
	}
	if err := m.check(specs); err != nil {
		return err
	}
	m.mu.Lock()
	status := make(map[string]*Status, len(specs))
	for _, s := range specs {
		if st, ok := m.status[s.Name]; ok && st.Module == s.Module {
			status[s.Name] = st
		} else {
			status[s.Name] = &Status{Name: s.Name, Module: s.Module}
		}
	}
	m.specs, m.status = specs, status
	m.mu.Unlock()
	m.Refresh()
	return nil
}

func (m *Manager) builtins() []string {
	out := Modules()
	for k := range m.o.Extra {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// factory finds a module: the daemon's extras, the registry, then Lookup.
func (m *Manager) factory(module string) (Factory, string, error) {
	if f, ok := m.o.Extra[module]; ok {
		return f, "builtin", nil
	}
	if f, ok := Builtin(module); ok {
		return f, "builtin", nil
	}
	if m.o.Lookup == nil {
		return nil, "", ErrNoModule
	}
	u, err := m.o.Lookup(module)
	if err != nil {
		return nil, "", err
	}
	return u.Factory, u.Version, nil
}

func build(f Factory, s Spec) (Engine, error) {
	o := NewOpts(s.Opts)
	e, err := f(o)
	if err == nil {
		err = o.Done()
	}
	if err != nil {
		return nil, fmt.Errorf("engine %s: %w", s.Name, err)
	}
	return e, nil
}

// Len is the number of configured engines.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.specs)
}

// current returns the configured engines.
func (m *Manager) current() []Spec {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.specs
}

// Refresh makes the Manager look its user modules up again, starting the
// engines whose module appeared and restarting those whose module changed.
func (m *Manager) Refresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

// Status returns each engine's state, in configuration order.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.specs))
	for _, s := range m.specs {
		out = append(out, *m.status[s.Name])
	}
	return out
}

func (m *Manager) setStatus(name string, f func(*Status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.status[name]; st != nil { // nil: an engine being stopped, no longer configured
		f(st)
	}
}

type runningEngine struct {
	spec    Spec
	version string
	cancel  context.CancelFunc
	done    chan struct{}
}

// Run runs the engines until ctx ends and returns once each has stopped.
func (m *Manager) Run(ctx context.Context) error {
	runs := map[string]*runningEngine{}
	defer func() {
		for _, r := range runs {
			r.cancel()
		}
		for _, r := range runs {
			<-r.done
		}
	}()
	for {
		specs := m.current()
		want := make(map[string]bool, len(specs))
		for _, s := range specs {
			want[s.Name] = true
		}
		for name, r := range runs {
			if !want[name] {
				m.o.Log.Info("engine no longer configured: stopping it", zap.String("engine", name))
				r.cancel()
				<-r.done
				delete(runs, name)
			}
		}
		for _, s := range specs {
			f, version, err := m.factory(s.Module)
			r := runs[s.Name]
			if r != nil && !reflect.DeepEqual(r.spec, s) {
				m.o.Log.Info("engine configuration changed: restarting the engine", zap.String("engine", s.Name))
				r.cancel()
				<-r.done
				delete(runs, s.Name)
				r = nil
			}
			if err != nil {
				if !errors.Is(err, ErrNoModule) {
					m.o.Log.Error("engine module unusable", zap.String("engine", s.Name), zap.String("module", s.Module), zap.Error(err))
					m.setStatus(s.Name, func(st *Status) { st.LastError = err.Error() })
				}
				if r != nil { // module gone: stop the engine
					r.cancel()
					<-r.done
					delete(runs, s.Name)
				}
				continue
			}
			if r != nil && r.version == version {
				continue
			}
			if r != nil {
				m.o.Log.Info("engine module changed: restarting the engine", zap.String("engine", s.Name), zap.String("version", version))
				r.cancel()
				<-r.done
			}
			rctx, cancel := context.WithCancel(ctx)
			r = &runningEngine{spec: s, version: version, cancel: cancel, done: make(chan struct{})}
			runs[s.Name] = r
			m.setStatus(s.Name, func(st *Status) { st.Version = version })
			go func() {
				defer close(r.done)
				m.supervise(rctx, s, f)
			}()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-m.refresh:
		}
	}
}

// supervise runs one engine, restarting it with backoff when it fails,
// panics or returns before ctx ends.
func (m *Manager) supervise(ctx context.Context, s Spec, f Factory) {
	log := m.o.Log.With(zap.String("engine", s.Name))
	backoff := m.o.MinBackoff
	for {
		start := time.Now()
		m.setStatus(s.Name, func(st *Status) { st.Running = true })
		err := m.runOnce(ctx, s, f, log)
		m.setStatus(s.Name, func(st *Status) { st.Running = false })
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("engine returned")
		}
		if time.Since(start) > time.Minute {
			backoff = m.o.MinBackoff
		}
		m.setStatus(s.Name, func(st *Status) { st.Restarts++; st.LastError = err.Error() })
		log.Error("engine stopped; restarting it", zap.Error(err), zap.Duration("in", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff *= 2
		if backoff > m.o.MaxBackoff {
			backoff = m.o.MaxBackoff
		}
	}
}

// runOnce makes and runs the engine once; a panic is an error.
func (m *Manager) runOnce(ctx context.Context, s Spec, f Factory, log *zap.Logger) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("engine panicked: %v", r)
			log.Error("engine panicked", zap.String("panic", fmt.Sprint(r)), zap.ByteString("stack", debug.Stack()))
		}
	}()
	e, err := build(f, s)
	if err != nil {
		return err
	}
	env := m.o.Env
	env.Name = s.Name
	env.Log = log
	if env.Fire == nil && env.Bus != nil {
		env.Fire = env.Bus.Publish
	}
	if env.FireMaster == nil {
		fire := env.Fire
		env.FireMaster = func(tag string, data map[string]any) error { fire(tag, data); return nil }
	}
	log.Info("engine started", zap.String("module", s.Module))
	return e.Run(ctx, &env)
}
