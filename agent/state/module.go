package state

import (
	"context"
	"sort"

	"github.com/halite-fleet/halite/state"
)

// Host is what state functions need from the agent running them. The
// agent implements it; tests give a fake or a temporary agent.
type Host interface {
	// ID is the device's id.
	ID() string
	// Grains is the device's grains (read-only).
	Grains() map[string]any
	// Exec runs an execution function (module.run, a state's helpers) and
	// returns its return, or an error when it failed.
	Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error)
	// Fire sends an event to the master's bus (event.send, progress events).
	Fire(tag string, data map[string]any) error
	// CacheDir is a directory the agent owns for state data (backups of
	// replaced files, downloaded sources), made on first use.
	CacheDir() string
}

// Call is one state function run: the chunk with its arguments, and whether
// it is a test run (test=True: change nothing, say what would change, and
// return Result None when something would).
type Call struct {
	Chunk state.Chunk
	Name  string
	Test  bool
	Host  Host
	// Watched is set when the engine calls a module's Watch function
	// because a watched state changed (mod_watch); Changes of the
	// watched states, by tag.
	Watched map[string]map[string]any
}

// Func is a state function: it brings the device to what c declares and
// returns the outcome. It must not panic on any argument (the engine
// recovers a panic and fails the state, never the agent), must honour ctx,
// and under c.Test must change nothing.
type Func func(ctx context.Context, c *Call) state.Ret

// Mod is one state function and, optionally, its module's mod_watch.
type Mod struct {
	Run Func
	// Doc is shown by sys.state_doc.
	Doc string
	// RunCheck is true when the function reads unless, onlyif and
	// creates itself (Salt's mod_run_check, e.g. cmd.run); otherwise the
	// engine runs them before the function.
	RunCheck bool
}

var (
	funcs   = map[string]Mod{}  // "file.managed"
	watches = map[string]Func{} // "service": its mod_watch
)

// Register adds a state function by its full name ("file.managed"); call it
// from init. A duplicate name panics.
func Register(name string, m Mod) {
	if _, dup := funcs[name]; dup {
		panic("state: function " + name + " registered twice")
	}
	funcs[name] = m
}

// RegisterWatch adds a module's mod_watch ("service", "cmd"): what a state
// of that module does instead of its function when a state it watches
// changed. Call it from init.
func RegisterWatch(module string, f Func) {
	if _, dup := watches[module]; dup {
		panic("state: mod_watch of " + module + " registered twice")
	}
	watches[module] = f
}

// Lookup returns the state function named fun ("file.managed").
func Lookup(fun string) (Mod, bool) {
	m, ok := funcs[fun]
	return m, ok
}

// LookupWatch returns module's mod_watch.
func LookupWatch(module string) (Func, bool) {
	f, ok := watches[module]
	return f, ok
}

// Functions lists the state functions, sorted.
func Functions() []string {
	out := make([]string, 0, len(funcs))
	for k := range funcs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
