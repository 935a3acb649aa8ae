package localcache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("local_cache", returners.Caps{JobCache: true}, New)
}

// Returner adapts a *jobcache.Cache.
type Returner struct{ c *jobcache.Cache }

// New takes the cache from cfg.Embedded.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	c, ok := cfg.Embedded.(*jobcache.Cache)
	if !ok || c == nil {
		return nil, fmt.Errorf("local_cache runs only on the master (no embedded job cache here)")
	}
	return Wrap(c), nil
}

// Wrap adapts c.
func Wrap(c *jobcache.Cache) *Returner { return &Returner{c: c} }

// Close does nothing: the master owns the cache.
func (r *Returner) Close() error { return nil }

func toInt(v any) int {
	switch v := v.(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

// Returner stores the return; a second one of (jid, id) is kept out.
func (r *Returner) Returner(_ context.Context, ret map[string]any) error {
	args, _ := ret["fun_args"].([]any)
	err := r.c.SaveReturn(&protocol.ReturnBody{
		ID: returners.Str(ret, "id"), JID: returners.Str(ret, "jid"), Fun: returners.Str(ret, "fun"),
		FunArgs: args, Return: ret["return"], Retcode: toInt(ret["retcode"]),
		Success: returners.Truthy(ret, "success"), Stamp: returners.Str(ret, "_stamp"),
	})
	if err != nil {
		return returners.Permanent(err)
	}
	return nil
}

// PrepJID returns passed, or a new jid.
func (r *Returner) PrepJID(_ context.Context, _ bool, passed string) (string, error) {
	return returners.PrepJID(passed), nil
}

// SaveLoad stores the load.
func (r *Returner) SaveLoad(_ context.Context, jid string, load map[string]any, minions []string) error {
	l := &jobcache.Load{JID: jid, Tgt: returners.Str(load, "tgt"), TgtType: returners.Str(load, "tgt_type"),
		Fun: returners.Str(load, "fun"), User: returners.Str(load, "user"), Ret: returners.Str(load, "ret"),
		Minions: minions, StartTime: time.Now()}
	l.Arg, _ = load["arg"].([]any)
	l.Kwarg, _ = load["kwarg"].(map[string]any)
	if len(l.Minions) == 0 {
		if ms, ok := load["minions"].([]any); ok {
			for _, m := range ms {
				l.Minions = append(l.Minions, fmt.Sprint(m))
			}
		}
	}
	if err := r.c.SaveLoad(l); err != nil {
		return returners.Permanent(err)
	}
	return nil
}

// LoadMap is a jobcache.Load as Salt's load dict.
func LoadMap(l *jobcache.Load) map[string]any {
	arg := l.Arg
	if arg == nil {
		arg = []any{}
	}
	minions := l.Minions
	if minions == nil {
		minions = []string{}
	}
	m := map[string]any{"jid": l.JID, "tgt": l.Tgt, "tgt_type": l.TgtType, "fun": l.Fun, "arg": arg,
		"minions": minions, "user": l.User, "_stamp": l.StartTime.UTC().Format("2006-01-02T15:04:05.000000")}
	if l.Ret != "" {
		m["ret"] = l.Ret
	}
	if len(l.Kwarg) > 0 {
		m["kwarg"] = l.Kwarg
	}
	return m
}

// GetLoad returns the load, or an empty map.
func (r *Returner) GetLoad(_ context.Context, jid string) (map[string]any, error) {
	l, err := r.c.GetLoad(jid)
	if errors.Is(err, jobcache.ErrNotFound) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	return LoadMap(l), nil
}

// SaveMinions records the minions in the job's load.
func (r *Returner) SaveMinions(_ context.Context, jid string, minions []string) error {
	l, err := r.c.GetLoad(jid)
	if err != nil {
		return err
	}
	l.Minions = minions
	return r.c.SaveLoad(l)
}

// GetJID returns the return dicts by minion.
func (r *Returner) GetJID(_ context.Context, jid string) (map[string]map[string]any, error) {
	rets, err := r.c.GetReturns(jid)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(rets))
	for id, b := range rets {
		out[id] = b.Map()
	}
	return out, nil
}

// GetFun returns minion -> jid of its last job of fun.
func (r *Returner) GetFun(_ context.Context, fun string) (map[string]any, error) {
	loads, err := r.c.ListJobs(time.Time{}, 0) // newest first
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, l := range loads {
		if l.Fun != fun {
			continue
		}
		rets, err := r.c.GetReturns(l.JID)
		if err != nil {
			return nil, err
		}
		for id := range rets {
			if _, seen := out[id]; !seen {
				out[id] = l.JID
			}
		}
	}
	return out, nil
}

// GetJIDs returns every job as format_jid_instance.
func (r *Returner) GetJIDs(context.Context) (map[string]map[string]any, error) {
	loads, err := r.c.ListJobs(time.Time{}, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(loads))
	for _, l := range loads {
		out[l.JID] = returners.FormatJIDInstance(l.JID, LoadMap(l))
	}
	return out, nil
}

// GetMinions returns every minion that returned for a job held.
func (r *Returner) GetMinions(context.Context) ([]string, error) {
	loads, err := r.c.ListJobs(time.Time{}, 0)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, l := range loads {
		rets, err := r.c.GetReturns(l.JID)
		if err != nil {
			return nil, err
		}
		for id := range rets {
			set[id] = true
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// CleanOldJobs purges jobs older than keep.
func (r *Returner) CleanOldJobs(_ context.Context, keep time.Duration) error {
	_, err := r.c.CleanOld(keep, time.Now())
	return err
}
