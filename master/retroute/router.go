package retroute

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
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

// Defaults of the options read here.
const (
	defaultEventBatch     = 1000 // events per batch when event_return_queue is 0
	eventSubscriptionSize = 1 << 16
)

// Options are what a Router uses.
type Options struct {
	// Config holds the options read: cachedir, returner_queue_max,
	// event_return, event_return_queue, event_return_queue_max_seconds,
	// event_return_whitelist, event_return_blacklist, ext_job_cache,
	// master_job_cache, keep_jobs, and the raw options the returners read
	// their own settings from.
	Config *config.Master
	// MasterID is the master's id, as the returners see it.
	MasterID string
	// Bus is the master's event bus, read for event_return.
	Bus *event.Bus
	// Cache is the embedded job cache: where a return's job is looked up
	// when the router did not see it published, and what the local_cache
	// returner serves.
	Cache *jobcache.Cache
	Log   *zap.Logger
}

// Router is the master's returners: a durable queue and a worker each,
// opened when first named (at start for the configured ones, when a job
// names one with --return, and for every queue left on disk).
type Router struct {
	log      *zap.Logger
	dir      string
	queueMax int
	cfg      returners.Config
	cache    *jobcache.Cache

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
	wake    chan struct{}       // tells Run that fresh has some
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

// New checks the returner options; an unknown returner, or one without
// the functions its role needs, is an error naming it. It opens
// master_job_cache's returner, and subscribes to the bus for
// event_return, so that no event fired before Run is missed.
func New(o Options) (*Router, error) {
	c := o.Config
	rs := &Router{
		log: o.Log, dir: filepath.Join(c.CacheDir, "returners"), cache: o.Cache,
		queueMax: c.ReturnerQueueMax, evBatch: c.EventReturnQueue,
		evMaxWait: time.Duration(c.EventReturnQueueMaxSeconds) * time.Second,
		workers:   map[string]*returners.Worker{}, opened: map[string]returners.Returner{},
		wake: make(chan struct{}, 1), jobRets: map[string]jobRoute{},
		cfg: returners.Config{Opts: c.Raw, MasterID: o.MasterID, KeepJobs: time.Duration(c.KeepJobs) * time.Hour,
			Log: o.Log, Embedded: o.Cache},
	}
	rs.evWhite = c.EventReturnWhitelist
	rs.evBlack = c.EventReturnBlacklist
	rs.extJobCache = splitNames(strings.Join(c.ExtJobCache, ","))
	for _, n := range rs.extJobCache {
		if err := returners.Check(n, returners.RoleReturn); err != nil {
			return nil, fmt.Errorf("ext_job_cache: %w", err)
		}
	}
	for _, n := range c.EventReturn {
		for _, n := range splitNames(n) {
			if err := returners.Check(n, returners.RoleEvent); err != nil {
				return nil, fmt.Errorf("event_return: %w", err)
			}
			rs.eventNames = append(rs.eventNames, n)
		}
	}
	if len(rs.eventNames) > 0 {
		rs.evSub = o.Bus.Subscribe("*", eventSubscriptionSize)
	}
	if name := c.MasterJobCache; name != "" && name != "local_cache" {
		if err := returners.Check(name, returners.RoleJobCache); err != nil {
			return nil, fmt.Errorf("master_job_cache: %w", err)
		}
		r, err := rs.Open(context.Background(), name)
		if err != nil {
			return nil, fmt.Errorf("master_job_cache: %w", err)
		}
		rs.jobCacheName, rs.jobCache = name, r.(returners.JobCache)
	}
	return rs, nil
}

// JobCache is master_job_cache's returner, or nil when the master's job
// cache is the embedded one.
func (rs *Router) JobCache() returners.JobCache { return rs.jobCache }

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

// CheckReturn validates a job's --return names.
func CheckReturn(ret string) error {
	for _, n := range splitNames(ret) {
		if err := returners.Check(n, returners.RoleReturn); err != nil {
			return err
		}
	}
	return nil
}

// AgentReturners keeps the names of an agent's return: option that are
// returners the master has, warning about the others on log.
func AgentReturners(log *zap.Logger, names []string) []string {
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

// Open returns the shared instance of returner name, making it once.
func (rs *Router) Open(ctx context.Context, name string) (returners.Returner, error) {
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

// QueuePath is the file of returner name's queue.
func (rs *Router) QueuePath(name string) string { return filepath.Join(rs.dir, name+".queue") }

// Opened returns the worker of name if it was made already.
func (rs *Router) Opened(name string) (*returners.Worker, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	w, ok := rs.workers[name]
	return w, ok
}

// Worker returns the worker of name, opening its queue and returner the
// first time; Run starts it.
func (rs *Router) Worker(name string) (*returners.Worker, error) {
	rs.mu.Lock()
	w, ok := rs.workers[name]
	rs.mu.Unlock()
	if ok {
		return w, nil
	}
	r, err := rs.Open(context.Background(), name)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if w, ok := rs.workers[name]; ok {
		return w, nil
	}
	q, err := queue.Open(rs.QueuePath(name), rs.queueMax)
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
func (rs *Router) push(names []string, item *returners.Item) {
	for _, n := range names {
		w, err := rs.Worker(n)
		if err == nil {
			err = w.Queue().Push(item)
		}
		if err != nil {
			rs.log.Error("queue for returner", zap.String("returner", n), zap.String("kind", item.Kind),
				zap.String("jid", item.JID+returners.Str(item.Ret, "jid")), zap.Error(err))
		}
	}
}

// JobPublished records where a job's returns go and queues its load for
// the external job cache.
func (rs *Router) JobPublished(l *jobcache.Load) {
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

// Returned queues a stored return for the external job cache, the job's
// returners and the returners of the agent's return: option (agentRets).
func (rs *Router) Returned(b *protocol.ReturnBody, agentRets []string) {
	rs.mu.Lock()
	route, ok := rs.jobRets[b.JID]
	rs.mu.Unlock()
	if !ok {
		if l, err := rs.cache.GetLoad(b.JID); err == nil {
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

// Run starts the workers (those of queues left on disk first), batches
// events for event_return, and closes every queue and returner when ctx
// ends, once the workers it started have exited. It returns nil then.
func (rs *Router) Run(ctx context.Context) error {
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
		if _, err := rs.Worker(n); err != nil {
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
func (rs *Router) eventLoop(ctx context.Context, sub *event.Subscription) {
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
func (rs *Router) keepEvent(tag string) bool {
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

// Statuses returns every worker's status, by name.
func (rs *Router) Statuses() []returners.Status {
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
