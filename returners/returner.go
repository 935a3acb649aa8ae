package returners

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Event is one event for EventReturner: Salt's {"tag": ..., "data": ...}.
type Event struct {
	Tag  string         `json:"tag"`
	Data map[string]any `json:"data"`
}

// Returner is Salt's returner(ret): it stores one minion's return dict (id,
// jid, fun, fun_args, return, retcode, success, _stamp). It must be
// idempotent on (ret["jid"], ret["id"]).
type Returner interface {
	Returner(ctx context.Context, ret map[string]any) error
	Close() error
}

// JobCache is what a returner needs to stand in for the master job cache
// (master_job_cache) and serve the ret.* runners.
type JobCache interface {
	Returner
	// PrepJID returns passed when it is not empty, else a new jid.
	PrepJID(ctx context.Context, nocache bool, passed string) (string, error)
	// SaveLoad stores a job's load (Salt's load dict, with "jid").
	SaveLoad(ctx context.Context, jid string, load map[string]any, minions []string) error
	// GetLoad returns the load of jid, or an empty map.
	GetLoad(ctx context.Context, jid string) (map[string]any, error)
	// SaveMinions records the minions a job was sent to.
	SaveMinions(ctx context.Context, jid string, minions []string) error
	// GetJID returns the return dicts of jid by minion id.
	GetJID(ctx context.Context, jid string) (map[string]map[string]any, error)
	// GetFun returns, by minion, the jid of the last job that ran fun there.
	GetFun(ctx context.Context, fun string) (map[string]any, error)
	// GetJIDs returns every job held, by jid, as Salt's
	// format_jid_instance (Function, Arguments, Target, ...).
	GetJIDs(ctx context.Context) (map[string]map[string]any, error)
	// GetMinions returns every minion id that has returned.
	GetMinions(ctx context.Context) ([]string, error)
	// CleanOldJobs purges what is older than keep (keep_jobs).
	CleanOldJobs(ctx context.Context, keep time.Duration) error
}

// EventReturner is Salt's event_return(events).
type EventReturner interface {
	EventReturn(ctx context.Context, events []Event) error
}

// Config is what a backend is made from.
type Config struct {
	// Opts are the daemon's options as loaded (the master's or agent's
	// Raw), where backends find "redis.host" and the like.
	Opts map[string]any
	// RetConfig is --return_config: options under "<RetConfig>.<name>."
	// win over the plain ones.
	RetConfig string
	// Kwargs is --return_kwargs: attr -> value, over everything else.
	Kwargs map[string]any
	// MasterID is the master's id (salt_events.master_id).
	MasterID string
	// KeepJobs is how long job data is kept (keep_jobs).
	KeepJobs time.Duration
	Log      *zap.Logger
	// Embedded is the master's embedded job cache (*jobcache.Cache), for
	// local_cache (master/jobcache/localcache).
	Embedded any
}

// Factory makes a backend.
type Factory func(ctx context.Context, cfg Config) (Returner, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a backend known by its virtual name (Salt's
// __virtualname__). It panics on a name registered twice.
func Register(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("returners: " + name + " registered twice")
	}
	registry[name] = f
}

// Names lists the registered virtual names, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Role is what a returner is used for; each needs its own functions.
type Role int

const (
	// RoleReturn needs returner(ret) (--return, return:).
	RoleReturn Role = iota
	// RoleJobCache needs the job cache functions (master_job_cache,
	// ext_job_cache, ret.*).
	RoleJobCache
	// RoleEvent needs event_return (event_return).
	RoleEvent
)

func (r Role) String() string {
	switch r {
	case RoleJobCache:
		return "master_job_cache"
	case RoleEvent:
		return "event_return"
	}
	return "return"
}

// ErrUnknown is wrapped by Open for a name no backend registered.
var ErrUnknown = errors.New("no such returner")

// ErrLacks is wrapped by Open for a returner without the functions a role
// needs.
var ErrLacks = errors.New("returner lacks the functions")

// Check tells whether name is registered and its backend type can serve
// role, without connecting. Backends declare their functions with Caps.
func Check(name string, role Role) error {
	regMu.RLock()
	_, ok := registry[name]
	c := caps[name]
	regMu.RUnlock()
	if !ok {
		return fmt.Errorf("returner %q: %w (known: %s)", name, ErrUnknown, strings.Join(Names(), ", "))
	}
	switch {
	case role == RoleJobCache && !c.JobCache:
		return fmt.Errorf("returner %q: %w for %s (prep_jid, save_load, get_load, get_jid ...)", name, ErrLacks, role)
	case role == RoleEvent && !c.Event:
		return fmt.Errorf("returner %q: %w for %s (event_return)", name, ErrLacks, role)
	}
	return nil
}

// Caps says which of Salt's function groups a backend has, so that a config
// naming it for a role it cannot serve fails before anything connects.
type Caps struct{ JobCache, Event bool }

var caps = map[string]Caps{}

// RegisterCaps is Register that also declares the backend's functions.
func RegisterCaps(name string, c Caps, f Factory) {
	Register(name, f)
	regMu.Lock()
	caps[name] = c
	regMu.Unlock()
}

// Open checks name against role and makes the backend. The returned value
// implements JobCache or EventReturner when the role needs it.
func Open(ctx context.Context, name string, role Role, cfg Config) (Returner, error) {
	if err := Check(name, role); err != nil {
		return nil, err
	}
	regMu.RLock()
	f := registry[name]
	regMu.RUnlock()
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Opts == nil {
		cfg.Opts = map[string]any{}
	}
	r, err := f(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("returner %s: %w", name, err)
	}
	return r, nil
}

// permanent marks an error a retry cannot fix.
type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent wraps err to say the backend refused this row for good (too
// large, bad encoding): the Worker sets it aside in the dead-letter area
// instead of retrying. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanent
	return errors.As(err, &p)
}
