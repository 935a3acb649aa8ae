package beacons

import (
	"context"
	"sort"
)

// Beacon is one beacon instance. Check is called every interval; each map
// it returns becomes one event, whose "tag" key, if any, is appended to the
// beacon's tag and removed from the data. A beacon that holds resources
// (inotify, an open log file) also has Close() error.
type Beacon interface {
	Check(ctx context.Context) ([]map[string]any, error)
}

// env is what beacons read the system through; tests point it elsewhere.
type env struct {
	proc string // the proc file system, /proc
	sys  string // /sys
}

func defaultEnv() *env { return &env{proc: "/proc", sys: "/sys"} }

// factory builds a beacon from its own options, taking each option it knows
// from o.
type factory func(o *opts, e *env) (Beacon, error)

// modules are the built-in beacon modules by name.
var modules = map[string]factory{}

func register(name string, f factory) { modules[name] = f }

// Modules returns the names of the beacon modules, sorted.
func Modules() []string {
	out := make([]string, 0, len(modules))
	for k := range modules {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkFunc adapts a function to Beacon.
type checkFunc func(ctx context.Context) ([]map[string]any, error)

func (f checkFunc) Check(ctx context.Context) ([]map[string]any, error) { return f(ctx) }
