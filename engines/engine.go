package engines

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
)

// Engine is one running engine instance. Run works until ctx ends and then
// returns nil; an error (or a panic) before that makes the Manager restart
// the engine after a backoff. Run must return only once every goroutine it
// started has exited.
type Engine interface {
	Run(ctx context.Context, env *Env) error
}

// EngineFunc adapts a function to Engine.
type EngineFunc func(ctx context.Context, env *Env) error

// Run calls f.
func (f EngineFunc) Run(ctx context.Context, env *Env) error { return f(ctx, env) }

// Factory checks an engine's options and makes an instance. It takes every
// option it knows from o (the Manager refuses the rest) and must not start
// anything: it is also called once at start only to check the options.
type Factory func(o *Opts) (Engine, error)

// Env is what an engine gets from its daemon.
type Env struct {
	Role string // "master" or "agent"
	ID   string // the daemon's id
	Name string // the engine's name in the engines: list
	// Bus is the daemon's event bus: engines subscribe to it to listen.
	Bus *event.Bus
	// Fire publishes an event on the daemon's own bus.
	Fire func(tag string, data map[string]any)
	// FireMaster sends an event to the master (agent: through the outbox
	// spool; master and masterless agent: same as Fire).
	FireMaster func(tag string, data map[string]any) error
	Log        *zap.Logger
	// Grains returns the daemon's grains (the master: nil).
	Grains func() map[string]any
	// Config is the daemon's configuration as loaded (Raw).
	Config map[string]any
	// Call runs an execution function (agent) or a runner (master); nil
	// where there is none.
	Call func(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error)
	// Figures returns named counters of the daemon (bus, beacons, engines)
	// for the metrics engine; nil: none beyond the bus.
	Figures func() map[string]float64
}

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register adds a built-in engine module. It is called from init
// functions; a duplicate panics.
func Register(module string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[module]; dup {
		panic("engines: module " + module + " registered twice")
	}
	registry[module] = f
}

// Builtin returns the factory of a registered module.
func Builtin(module string) (Factory, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	f, ok := registry[module]
	return f, ok
}

// Modules returns the registered module names, sorted.
func Modules() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Spec is one entry of the engines: list.
type Spec struct {
	Name   string         // the key in the list
	Module string         // engine_module, else Name
	Opts   map[string]any // the options, engine_module removed
}

// ParseConfig reads Salt's engines: list: each item a one-key mapping of
// engine name to its options (engine_module picks the module, so that one
// module can run several times), or a bare name.
func ParseConfig(list []any) ([]Spec, error) {
	var out []Spec
	seen := map[string]bool{}
	for i, it := range list {
		var name string
		var v any
		switch x := it.(type) {
		case string:
			name = x
		case map[string]any:
			if len(x) != 1 {
				return nil, fmt.Errorf("engines: item %d: expected one engine name with its options, got %d keys", i+1, len(x))
			}
			for k, o := range x {
				name, v = k, o
			}
		default:
			return nil, fmt.Errorf("engines: item %d: expected \"- name: {options}\", got %v", i+1, it)
		}
		if name == "" {
			return nil, fmt.Errorf("engines: item %d: empty engine name", i+1)
		}
		if seen[name] {
			return nil, fmt.Errorf("engine %s: listed twice (use engine_module to run a module more than once)", name)
		}
		seen[name] = true
		opts := map[string]any{}
		if v != nil {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("engine %s: expected a mapping of options, got %v", name, v)
			}
			for k, x := range m {
				opts[k] = x
			}
		}
		s := Spec{Name: name, Module: name, Opts: opts}
		if mod, ok := opts["engine_module"]; ok {
			ms, ok := mod.(string)
			if !ok || ms == "" {
				return nil, fmt.Errorf("engine %s: option engine_module: expected a module name, got %v", name, mod)
			}
			s.Module = ms
			delete(opts, "engine_module")
		}
		out = append(out, s)
	}
	return out, nil
}
