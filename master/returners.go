package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/master/retroute"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/returners"
)

// The master's returners are package retroute (m.returners); here are
// what reads them: the jobs runners' job cache (jobs), and the ret.* and
// returners.* runners.

// checkReturn validates --return names for a job.
func checkReturn(ret string) error {
	if err := retroute.CheckReturn(ret); err != nil {
		return &api.RemoteError{Code: api.CodeBadRequest, Msg: "--return: " + err.Error()}
	}
	return nil
}

// jobReader is what the jobs.* runners read: the embedded job cache, or
// master_job_cache's returner.
type jobReader interface {
	GetLoad(jid string) (*jobcache.Load, error)
	GetReturns(jid string) (map[string]*protocol.ReturnBody, error)
	ListJobs(since time.Time, limit int) ([]*jobcache.Load, error)
}

// jobs returns the job cache the runners read.
func (m *Master) jobs() jobReader {
	if m.returners != nil {
		if jc := m.returners.JobCache(); jc != nil {
			return &extJobCache{r: jc}
		}
	}
	return m.cache
}

// extJobCache reads master_job_cache's returner as the jobs runners want.
type extJobCache struct{ r returners.JobCache }

func (e *extJobCache) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (e *extJobCache) GetLoad(jid string) (*jobcache.Load, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	m, err := e.r.GetLoad(ctx, jid)
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("get load %s: %w", jid, jobcache.ErrNotFound)
	}
	return mapLoad(jid, m), nil
}

func mapLoad(jid string, m map[string]any) *jobcache.Load {
	l := &jobcache.Load{JID: jid, Tgt: returners.Str(m, "tgt"), TgtType: returners.Str(m, "tgt_type"),
		Fun: returners.Str(m, "fun"), User: returners.Str(m, "user"), Ret: returners.Str(m, "ret")}
	l.Arg, _ = m["arg"].([]any)
	l.Kwarg, _ = m["kwarg"].(map[string]any)
	if ms, ok := m["minions"].([]any); ok {
		for _, x := range ms {
			l.Minions = append(l.Minions, fmt.Sprint(x))
		}
	}
	l.StartTime = jidTime(jid)
	return l
}

func jidTime(jid string) time.Time {
	if len(jid) < 20 {
		return time.Time{}
	}
	t, err := time.Parse("20060102150405.000000", jid[:14]+"."+jid[14:20])
	if err != nil {
		return time.Time{}
	}
	return t
}

func (e *extJobCache) GetReturns(jid string) (map[string]*protocol.ReturnBody, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	rets, err := e.r.GetJID(ctx, jid)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*protocol.ReturnBody, len(rets))
	for id, r := range rets {
		args, _ := r["fun_args"].([]any)
		rc, _ := toInt(r["retcode"])
		out[id] = &protocol.ReturnBody{ID: id, JID: jid, Fun: returners.Str(r, "fun"), FunArgs: args,
			Return: r["return"], Retcode: rc, Success: returners.Truthy(r, "success"), Stamp: returners.Str(r, "_stamp")}
	}
	return out, nil
}

func (e *extJobCache) ListJobs(since time.Time, limit int) ([]*jobcache.Load, error) {
	ctx, cancel := e.ctx()
	defer cancel()
	jobs, err := e.r.GetJIDs(ctx)
	if err != nil {
		return nil, err
	}
	from := ""
	if !since.IsZero() {
		from = jobcache.JIDAt(since)
	}
	out := []*jobcache.Load{}
	for jid, inst := range jobs {
		if jid < from {
			continue
		}
		args, _ := inst["Arguments"].([]any)
		out = append(out, &jobcache.Load{JID: jid, Fun: returners.Str(inst, "Function"), Arg: args,
			Tgt: returners.Str(inst, "Target"), TgtType: returners.Str(inst, "Target-type"),
			User: returners.Str(inst, "User"), StartTime: jidTime(jid)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].JID > out[j].JID })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// returnerRunners are ret.get_jid, ret.get_fun, ret.get_jids,
// ret.get_minions (Salt's ret module) and returners.status.
func returnerRunners(m *Master) map[string]callFunc {
	jc := func(req *api.Request) (returners.JobCache, error) {
		a := &args{req: req}
		name, err := a.str(0, "returner", true)
		if err != nil {
			return nil, err
		}
		if err := returners.Check(name, returners.RoleJobCache); err != nil {
			return nil, badRequest("%s: %s", req.Fun, err.Error())
		}
		r, err := m.returners.Open(context.Background(), name)
		if err != nil {
			return nil, err
		}
		return r.(returners.JobCache), nil
	}
	return map[string]callFunc{
		"ret.get_jid": func(ctx context.Context, req *api.Request) (any, error) {
			r, err := jc(req)
			if err != nil {
				return nil, err
			}
			jid, err := (&args{req: req}).str(1, "jid", true)
			if err != nil {
				return nil, err
			}
			return r.GetJID(ctx, jid)
		},
		"ret.get_fun": func(ctx context.Context, req *api.Request) (any, error) {
			r, err := jc(req)
			if err != nil {
				return nil, err
			}
			fun, err := (&args{req: req}).str(1, "fun", true)
			if err != nil {
				return nil, err
			}
			return r.GetFun(ctx, fun)
		},
		"ret.get_jids": func(ctx context.Context, req *api.Request) (any, error) {
			r, err := jc(req)
			if err != nil {
				return nil, err
			}
			return r.GetJIDs(ctx)
		},
		"ret.get_minions": func(ctx context.Context, req *api.Request) (any, error) {
			r, err := jc(req)
			if err != nil {
				return nil, err
			}
			return r.GetMinions(ctx)
		},
		"returners.status": func(context.Context, *api.Request) (any, error) {
			out := map[string]any{}
			for _, s := range m.returners.Statuses() {
				e := map[string]any{"queued": s.Depth, "dead_letters": s.Dead, "delivered": s.Delivered,
					"failures": s.Failures, "retrying": s.Retrying}
				if s.LastError != "" {
					e["last_error"] = s.LastError
					e["last_error_at"] = s.LastErrorAt.Format(time.RFC3339)
				}
				out[s.Name] = e
			}
			return out, nil
		},
		"returners.requeue_dead": func(_ context.Context, req *api.Request) (any, error) {
			name, err := (&args{req: req}).str(0, "returner", true)
			if err != nil {
				return nil, err
			}
			if err := returners.Check(name, returners.RoleReturn); err != nil {
				return nil, badRequest("returners.requeue_dead: %s", err.Error())
			}
			p := m.returners.QueuePath(name)
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				return map[string]any{"requeued": 0}, nil
			}
			w, err := m.returners.Worker(name)
			if err != nil {
				return nil, err
			}
			n, err := w.Queue().RequeueDead()
			if err != nil {
				return nil, err
			}
			return map[string]any{"requeued": n}, nil
		},
		"returners.dead_letters": func(_ context.Context, req *api.Request) (any, error) {
			name, err := (&args{req: req}).str(0, "returner", true)
			if err != nil {
				return nil, err
			}
			p := m.returners.QueuePath(name)
			w, ok := m.returners.Opened(name)
			if !ok {
				if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
					return []any{}, nil
				}
				return nil, badRequest("returners.dead_letters: %s is not open", name)
			}
			dl, err := w.Queue().DeadLetters()
			if err != nil {
				return nil, err
			}
			out := make([]any, 0, len(dl))
			for _, d := range dl {
				out = append(out, map[string]any{"time": d.Time.Format(time.RFC3339), "reason": d.Reason, "item": string(d.Item)})
			}
			return out, nil
		},
	}
}
