package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/queue"
	"github.com/halite-fleet/halite/targets"

	// The returners the master offers, each registering itself.
	_ "github.com/halite-fleet/halite/master/jobcache/localcache"
	_ "github.com/halite-fleet/halite/returners/mqtt"
	_ "github.com/halite-fleet/halite/returners/mysql"
	_ "github.com/halite-fleet/halite/returners/nats"
	_ "github.com/halite-fleet/halite/returners/pgjsonb"
	_ "github.com/halite-fleet/halite/returners/rawfile_json"
	_ "github.com/halite-fleet/halite/returners/redis"
	_ "github.com/halite-fleet/halite/returners/syslog"
	_ "github.com/halite-fleet/halite/returners/webhook"
)

func init() {
	runnerTables = append(runnerTables, (*Master).returnerRunners)
	services = append(services, func(m *Master, ctx context.Context) error { return m.rets.run(ctx, m) })
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
	if m.rets != nil && m.rets.jobCache != nil {
		return &extJobCache{r: m.rets.jobCache}
	}
	return m.cache
}

// Defaults of the options read here.
const (
	defaultEventBatch     = 1000 // events per batch when event_return_queue is 0
	eventSubscriptionSize = 1 << 16
)

// retState is the master's returners: a durable queue and a worker each,
// opened when first named (at start for the configured ones, when a job
// names one with --return, and for every queue left on disk).
type retState struct {
	log      *zap.Logger
	dir      string
	queueMax int
	cfg      returners.Config

	jobCacheName string
	jobCache     returners.JobCache // nil: the embedded cache
	extJobCache  []string
	eventNames   []string
	evWhite      []string
	evBlack      []string
	evBatch      int
	evMaxWait    time.Duration

	evSub *event.Subscription // made in New so no early event is missed

	mu      sync.Mutex
	workers map[string]*returners.Worker
	opened  map[string]returners.Returner
	fresh   []*returners.Worker // opened, not started yet
	wake    chan struct{}       // tells run that fresh has some
	jobRets map[string]jobRoute // jid -> where its returns go
}

// jobRoute is where one job's returns go: its --return returners, opened
// with its --return_config and --return_kwargs, and the others
// (ext_job_cache) plain.
type jobRoute struct {
	ret       []string
	retConfig string
	retKwargs map[string]any
	plain     []string
}

func routeOf(l *jobcache.Load, ext []string) jobRoute {
	return jobRoute{ret: splitNames(l.Ret), retConfig: l.RetConfig, retKwargs: l.RetKwargs, plain: ext}
}

// newRetState checks the returner options; an unknown returner, or one
// without the functions its role needs, is an error naming it.
func newRetState(m *Master) (*retState, error) {
	rs := &retState{
		log: m.log.Named("returners"), dir: filepath.Join(m.cfg.CacheDir, "returners"),
		queueMax: m.cfg.ReturnerQueueMax, evBatch: m.cfg.EventReturnQueue,
		evMaxWait: time.Duration(m.cfg.EventReturnQueueMaxSeconds) * time.Second,
		workers:   map[string]*returners.Worker{}, opened: map[string]returners.Returner{},
		wake: make(chan struct{}, 1), jobRets: map[string]jobRoute{},
		cfg: returners.Config{Opts: m.cfg.Raw, MasterID: m.name, KeepJobs: time.Duration(m.cfg.KeepJobs) * time.Hour,
			Log: m.log.Named("returners"), Embedded: m.cache},
	}
	rs.evWhite = m.cfg.EventReturnWhitelist
	rs.evBlack = m.cfg.EventReturnBlacklist
	rs.extJobCache = splitNames(strings.Join(m.cfg.ExtJobCache, ","))
	for _, n := range rs.extJobCache {
		if err := returners.Check(n, returners.RoleReturn); err != nil {
			return nil, fmt.Errorf("ext_job_cache: %w", err)
		}
	}
	for _, n := range m.cfg.EventReturn {
		for _, n := range splitNames(n) {
			if err := returners.Check(n, returners.RoleEvent); err != nil {
				return nil, fmt.Errorf("event_return: %w", err)
			}
			rs.eventNames = append(rs.eventNames, n)
		}
	}
	if len(rs.eventNames) > 0 {
		rs.evSub = m.bus.Subscribe("*", eventSubscriptionSize)
	}
	if name := m.cfg.MasterJobCache; name != "" && name != "local_cache" {
		if err := returners.Check(name, returners.RoleJobCache); err != nil {
			return nil, fmt.Errorf("master_job_cache: %w", err)
		}
		r, err := rs.open(context.Background(), name)
		if err != nil {
			return nil, fmt.Errorf("master_job_cache: %w", err)
		}
		rs.jobCacheName, rs.jobCache = name, r.(returners.JobCache)
	}
	return rs, nil
}

// splitNames splits "a,b" (as --return takes it) into names.
func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// checkReturn validates --return names for a job.
func checkReturn(ret string) error {
	for _, n := range splitNames(ret) {
		if err := returners.Check(n, returners.RoleReturn); err != nil {
			return &api.RemoteError{Code: api.CodeBadRequest, Msg: "--return: " + err.Error()}
		}
	}
	return nil
}

// open returns the shared instance of returner name, making it once.
func (rs *retState) open(ctx context.Context, name string) (returners.Returner, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.opened[name]; ok {
		return r, nil
	}
	r, err := returners.Open(ctx, name, returners.RoleReturn, rs.cfg)
	if err != nil {
		return nil, err
	}
	rs.opened[name] = r
	return r, nil
}

// worker returns the worker of name, opening its queue and returner the
// first time; run starts it.
func (rs *retState) worker(name string) (*returners.Worker, error) {
	rs.mu.Lock()
	w, ok := rs.workers[name]
	rs.mu.Unlock()
	if ok {
		return w, nil
	}
	r, err := rs.open(context.Background(), name)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if w, ok := rs.workers[name]; ok {
		return w, nil
	}
	q, err := queue.Open(filepath.Join(rs.dir, name+".queue"), rs.queueMax)
	if err != nil {
		return nil, err
	}
	w = returners.NewWorker(name, q, r, rs.log)
	w.Alt = func(ctx context.Context, retConfig string, kwargs map[string]any) (returners.Returner, error) {
		cfg := rs.cfg
		cfg.RetConfig, cfg.Kwargs = retConfig, kwargs
		return returners.Open(ctx, name, returners.RoleReturn, cfg)
	}
	rs.workers[name] = w
	rs.fresh = append(rs.fresh, w)
	select {
	case rs.wake <- struct{}{}:
	default:
	}
	return w, nil
}

// push queues item for each returner named, logging what cannot be queued.
func (rs *retState) push(names []string, item *returners.Item) {
	for _, n := range names {
		w, err := rs.worker(n)
		if err == nil {
			err = w.Queue().Push(item)
		}
		if err != nil {
			rs.log.Error("queue for returner", zap.String("returner", n), zap.String("kind", item.Kind),
				zap.String("jid", item.JID+returners.Str(item.Ret, "jid")), zap.Error(err))
		}
	}
}

// jobPublished records where a job's returns go and queues its load for
// the external job cache.
func (rs *retState) jobPublished(l *jobcache.Load) {
	rs.mu.Lock()
	if len(rs.jobRets) > 100_000 {
		rs.jobRets = map[string]jobRoute{} // the loads hold them too
	}
	rs.jobRets[l.JID] = routeOf(l, rs.extJobCache)
	rs.mu.Unlock()
	if rs.jobCache != nil {
		rs.push([]string{rs.jobCacheName}, &returners.Item{Kind: returners.KindLoad, JID: l.JID,
			Load: loadMap(l), Minions: l.Minions})
	}
}

// agentReturners keeps the names of an agent's return: option that are
// returners the master has, warning about the others.
func (m *Master) agentReturners(log *zap.Logger, names []string) []string {
	var out []string
	for _, n := range names {
		for _, name := range splitNames(n) {
			if err := returners.Check(name, returners.RoleReturn); err != nil {
				log.Warn("agent's return: option names a returner the master cannot use; ignored",
					zap.String("returner", name), zap.Error(err))
				continue
			}
			out = append(out, name)
		}
	}
	return out
}

// returned queues a return for the job cache, the job's returners and the
// returners of the agent's return: option (agentRets).
func (m *Master) returned(b *protocol.ReturnBody, agentRets []string) {
	rs := m.rets
	if rs == nil {
		return
	}
	rs.mu.Lock()
	route, ok := rs.jobRets[b.JID]
	rs.mu.Unlock()
	if !ok {
		if l, err := m.cache.GetLoad(b.JID); err == nil {
			route = routeOf(l, rs.extJobCache)
		} else {
			route = jobRoute{plain: rs.extJobCache}
		}
	}
	alt := route.retConfig != "" || len(route.retKwargs) > 0
	var names []string
	if rs.jobCache != nil {
		names = append(names, rs.jobCacheName)
	}
	if !alt {
		names = append(names, route.ret...)
	}
	names = append(append(names, route.plain...), agentRets...)
	if len(names) == 0 && len(route.ret) == 0 {
		return
	}
	ret := b.Map()
	if b.Stamp == "" {
		ret["_stamp"] = event.Stamp(time.Now())
	}
	rs.push(uniq(names), &returners.Item{Kind: returners.KindRet, Ret: ret})
	if alt {
		// Salt's semantics: the job's own returners see its ret_config and
		// ret_kwargs; the other returners are the daemon's, configured as
		// they are.
		rs.push(uniq(route.ret), &returners.Item{Kind: returners.KindRet, Ret: ret,
			RetConfig: route.retConfig, RetKwargs: route.retKwargs})
	}
}

// uniq drops repeated names, keeping the order.
func uniq(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func loadMap(l *jobcache.Load) map[string]any {
	arg := l.Arg
	if arg == nil {
		arg = []any{}
	}
	minions := l.Minions
	if minions == nil {
		minions = []string{}
	}
	m := map[string]any{"jid": l.JID, "tgt": l.Tgt, "tgt_type": l.TgtType, "fun": l.Fun, "arg": arg,
		"minions": minions, "user": l.User, "_stamp": event.Stamp(l.StartTime)}
	if l.Ret != "" {
		m["ret"] = l.Ret
	}
	if l.RetConfig != "" {
		m["ret_config"] = l.RetConfig
	}
	if len(l.RetKwargs) > 0 {
		m["ret_kwargs"] = l.RetKwargs
	}
	if len(l.Kwarg) > 0 {
		m["kwarg"] = l.Kwarg
	}
	return m
}

// run starts the workers (those of queues left on disk first), batches
// events for event_return, and closes everything when ctx ends.
func (rs *retState) run(ctx context.Context, m *Master) error {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for _, w := range rs.workers {
			w.Queue().Close()
		}
		for n, r := range rs.opened {
			if err := r.Close(); err != nil {
				rs.log.Warn("close returner", zap.String("returner", n), zap.Error(err))
			}
		}
	}()
	start := func(w *returners.Worker) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	// Queues left by an earlier run, and the configured returners.
	left, _ := filepath.Glob(filepath.Join(rs.dir, "*.queue"))
	names := append([]string{}, rs.eventNames...)
	if rs.jobCacheName != "" {
		names = append(names, rs.jobCacheName)
	}
	for _, p := range left {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".queue"))
	}
	for _, n := range names {
		if _, err := rs.worker(n); err != nil {
			rs.log.Error("returner", zap.String("returner", n), zap.Error(err))
		}
	}
	if sub := rs.evSub; sub != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			rs.eventLoop(ctx, sub)
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rs.wake:
			rs.mu.Lock()
			fresh := rs.fresh
			rs.fresh = nil
			rs.mu.Unlock()
			for _, w := range fresh {
				start(w)
			}
		}
	}
}

// eventLoop batches the bus's events (event_return_queue of them, or what
// waits, at most event_return_queue_max_seconds) into the event returners'
// queues, after the whitelist and blacklist.
func (rs *retState) eventLoop(ctx context.Context, sub *event.Subscription) {
	limit := rs.evBatch
	if limit <= 0 {
		limit = defaultEventBatch
	}
	var batch []returners.Event
	var timer *time.Timer
	var timerC <-chan time.Time
	flush := func() {
		if len(batch) == 0 {
			return
		}
		rs.push(rs.eventNames, &returners.Item{Kind: returners.KindEvents, Events: batch})
		batch = nil
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
	}
	defer flush()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timerC:
			timer, timerC = nil, nil
			flush()
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			if rs.keepEvent(ev.Tag) {
				batch = append(batch, returners.Event{Tag: ev.Tag, Data: ev.Data})
			}
			if len(batch) >= limit {
				flush()
				continue
			}
			if rs.evBatch > 0 {
				// Salt's event_return_queue: wait for a full batch, at
				// most event_return_queue_max_seconds.
				if rs.evMaxWait > 0 && timer == nil && len(batch) > 0 {
					timer = time.NewTimer(rs.evMaxWait)
					timerC = timer.C
				}
				continue
			}
			// No queue set: send what has arrived as soon as nothing else
			// waits on the bus.
			if len(sub.C()) == 0 {
				flush()
			}
		}
	}
}

// keepEvent applies event_return_whitelist and event_return_blacklist
// (shell globs, as Salt's fnmatch).
func (rs *retState) keepEvent(tag string) bool {
	if len(rs.evWhite) > 0 {
		ok := false
		for _, p := range rs.evWhite {
			if targets.MatchGlob(p, tag) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, p := range rs.evBlack {
		if targets.MatchGlob(p, tag) {
			return false
		}
	}
	return true
}

// statuses returns every worker's status, by name.
func (rs *retState) statuses() []returners.Status {
	rs.mu.Lock()
	ws := make([]*returners.Worker, 0, len(rs.workers))
	for _, w := range rs.workers {
		ws = append(ws, w)
	}
	rs.mu.Unlock()
	out := make([]returners.Status, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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
func (m *Master) returnerRunners() map[string]callFunc {
	jc := func(req *api.Request) (returners.JobCache, error) {
		a := &args{req: req}
		name, err := a.str(0, "returner", true)
		if err != nil {
			return nil, err
		}
		if err := returners.Check(name, returners.RoleJobCache); err != nil {
			return nil, badRequest("%s: %s", req.Fun, err.Error())
		}
		r, err := m.rets.open(context.Background(), name)
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
			for _, s := range m.rets.statuses() {
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
			p := filepath.Join(m.rets.dir, name+".queue")
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				return map[string]any{"requeued": 0}, nil
			}
			w, err := m.rets.worker(name)
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
			p := filepath.Join(m.rets.dir, name+".queue")
			m.rets.mu.Lock()
			w, ok := m.rets.workers[name]
			m.rets.mu.Unlock()
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
