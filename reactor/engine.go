package reactor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/render/sls"
)

// Defaults of the options Salt documents.
const (
	DefaultWorkers  = 10    // reactor_worker_threads
	DefaultQueue    = 10000 // reactor_worker_hwm
	DefaultMaxDepth = 3     // reactor_max_depth
)

// Tags the engine fires.
const (
	TagOverflow    = "halite/reactor/overflow"     // data: dropped, dropped_total, queue, tag
	TagRenderError = "halite/reactor/render_error" // data: file, line, tag, error
	TagError       = "halite/reactor/error"        // data: file, line, id, tag, fun, error
	TagLoop        = "halite/reactor/loop"         // data: file, id, tag, fun, depth, max_depth
	ownPrefix      = "halite/reactor/"
)

// Renderer turns an SLS file into entries for one event.
type Renderer interface {
	SLS(name string, src []byte, tag string, data map[string]any) (text string, entries []sls.Entry, err error)
}

// Dispatcher runs one reaction. It returns the job id of the job, runner
// or wheel call it started ("" if none), so that the events of that call
// are known as the reactor's own (see the loop guard).
type Dispatcher func(ctx context.Context, r *Reaction) (jid string, err error)

// Options configure an Engine.
type Options struct {
	Rules    []Rule
	Files    Files
	Renderer Renderer
	Dispatch Dispatcher
	// Types are the reaction types this engine runs (the master: local,
	// runner, wheel; an agent: caller). Others are refused with an error
	// event.
	Types []string
	// Fire publishes the engine's own events; nil drops them (they are
	// still logged).
	Fire func(tag string, data map[string]any)
	// Workers is reactor_worker_threads, Queue reactor_worker_hwm; zero
	// means the default.
	Workers, Queue int
	// MaxDepth is reactor_max_depth, the loop guard: see Engine. Zero
	// means DefaultMaxDepth, below zero turns the guard off.
	MaxDepth int
	Log      *zap.Logger
}

// Stats counts what an Engine has done.
type Stats struct {
	Events     uint64 `json:"events"`      // events read
	Matched    uint64 `json:"matched"`     // events that matched a rule
	Queued     uint64 `json:"queued"`      // events queued for the workers
	Overflow   uint64 `json:"overflow"`    // matched events lost to a full queue or a lagging subscription
	Rendered   uint64 `json:"rendered"`    // files rendered
	RenderErrs uint64 `json:"render_errs"` // files that failed to render
	Reactions  uint64 `json:"reactions"`   // reactions dispatched
	Failed     uint64 `json:"failed"`      // reactions that returned an error
	Looped     uint64 `json:"looped"`      // reactions refused by the loop guard
}

// Engine matches events against the reactor rules and runs the reactions
// of the matching files on a worker pool.
//
// Loop guard: every job, runner or wheel call a reaction starts gets the
// reaction's depth (1 for a reaction to an outside event). Events of that
// call (salt/job/<jid>/…, salt/run/<jid>/…, salt/wheel/<jid>/…) carry that
// depth, and a reaction to them gets one more. A reaction deeper than
// MaxDepth is refused, counted, logged and fired as halite/reactor/loop.
// The engine fires no event of its own while reacting to one of its own
// (halite/reactor/…) events, so a broken file matched by "*" cannot feed
// itself.
type Engine struct {
	opts  Options
	log   *zap.Logger
	debug bool // the logger logs at debug level (its level when New ran): build the debug messages
	types map[string]bool

	mu    sync.RWMutex
	rules []Rule
	match *matcher

	queue chan work

	depthMu sync.Mutex
	depths  map[string]depthEntry

	filesMu sync.Mutex
	files   map[string]*fileEntry

	stats struct {
		events, matched, queued, overflow, rendered, renderErrs, reactions, failed, looped atomic.Uint64
	}
	lastOverflowWarn atomic.Int64
	overflowWarned   atomic.Uint64
}

type work struct {
	ev    event.Event
	rules []int
	depth int
	seen  time.Time
}

type depthEntry struct {
	depth int
	at    time.Time
}

type fileEntry struct {
	mod  time.Time
	size int64
	src  []byte
}

// New returns an engine; Run starts it.
func New(opts Options) *Engine {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.MaxDepth == 0 {
		opts.MaxDepth = DefaultMaxDepth
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	e := &Engine{
		opts:   opts,
		log:    opts.Log,
		debug:  opts.Log.Core().Enabled(zap.DebugLevel),
		types:  map[string]bool{},
		queue:  make(chan work, opts.Queue),
		depths: map[string]depthEntry{},
		files:  map[string]*fileEntry{},
	}
	for _, t := range opts.Types {
		e.types[t] = true
	}
	e.SetRules(opts.Rules)
	return e
}

// Rules returns the current rules.
func (e *Engine) Rules() []Rule {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return append([]Rule(nil), e.rules...)
}

// SetRules replaces the rules.
func (e *Engine) SetRules(rules []Rule) {
	rules = append([]Rule(nil), rules...)
	m := newMatcher(rules)
	e.mu.Lock()
	e.rules, e.match = rules, m
	e.mu.Unlock()
}

// Add adds files to the rule for tag, making the rule if there is none, as
// Salt's reactor.add does.
func (e *Engine) Add(tag string, files []string) {
	rules := e.Rules()
	for i := range rules {
		if rules[i].Tag == tag {
			rules[i].Files = append(append([]string(nil), rules[i].Files...), files...)
			e.SetRules(rules)
			return
		}
	}
	e.SetRules(append(rules, Rule{Tag: tag, Files: files}))
}

// Delete removes the rule for tag and reports whether there was one.
func (e *Engine) Delete(tag string) bool {
	rules := e.Rules()
	out := rules[:0]
	for _, r := range rules {
		if r.Tag != tag {
			out = append(out, r)
		}
	}
	if len(out) == len(rules) {
		return false
	}
	e.SetRules(out)
	return true
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	s := &e.stats
	return Stats{
		Events: s.events.Load(), Matched: s.matched.Load(), Queued: s.queued.Load(), Overflow: s.overflow.Load(),
		Rendered: s.rendered.Load(), RenderErrs: s.renderErrs.Load(), Reactions: s.reactions.Load(),
		Failed: s.failed.Load(), Looped: s.looped.Load(),
	}
}

// Match returns the files of the rules that match tag, in rule order.
func (e *Engine) Match(tag string) []string {
	e.mu.RLock()
	rules, m := e.rules, e.match
	e.mu.RUnlock()
	var out []string
	for _, i := range m.match(tag, nil) {
		out = append(out, rules[i].Files...)
	}
	return out
}

// Run subscribes to bus and reacts to its events until ctx ends; it
// returns once its reader and workers have exited.
func (e *Engine) Run(ctx context.Context, bus *event.Bus) error {
	sub := bus.Subscribe("*", e.opts.Queue)
	defer sub.Close()
	g, gctx := errgroup.WithContext(ctx)
	for i := 0; i < e.opts.Workers; i++ {
		g.Go(func() error { e.worker(gctx); return nil })
	}
	g.Go(func() error {
		var lost uint64
		for {
			select {
			case <-gctx.Done():
				return nil
			case ev, ok := <-sub.C():
				if !ok {
					return nil
				}
				if d := sub.Dropped(); d != lost {
					// The bus dropped events for us: we cannot know whether
					// they matched, so they count as overflow.
					e.overflowed(ev.Tag, d-lost)
					lost = d
				}
				e.Submit(ev)
			}
		}
	})
	return g.Wait()
}

// Submit matches ev and queues its work without blocking; it reports
// whether the event matched and was queued. A full queue is an overflow.
func (e *Engine) Submit(ev event.Event) bool {
	e.stats.events.Add(1)
	e.mu.RLock()
	m := e.match
	e.mu.RUnlock()
	idx := m.match(ev.Tag, nil)
	// Messages built only when logged: every event of the bus passes here.
	if e.debug {
		if ce := e.log.Check(zap.DebugLevel, "Gathering reactors for tag "+ev.Tag); ce != nil {
			ce.Write(zap.Int("rules", len(idx)))
		}
	}
	if len(idx) == 0 {
		return false
	}
	e.stats.matched.Add(1)
	w := work{ev: ev, rules: idx, depth: e.eventDepth(ev.Tag), seen: time.Now()}
	select {
	case e.queue <- w:
		e.stats.queued.Add(1)
		return true
	default:
		e.overflowed(ev.Tag, 1)
		return false
	}
}

// overflowed counts n lost events, logs at most once a second and fires
// halite/reactor/overflow with the same rate.
func (e *Engine) overflowed(tag string, n uint64) {
	total := e.stats.overflow.Add(n)
	now := time.Now().UnixNano()
	last := e.lastOverflowWarn.Load()
	if last != 0 && now-last < int64(time.Second) {
		return
	}
	if !e.lastOverflowWarn.CompareAndSwap(last, now) {
		return
	}
	prev := e.overflowWarned.Swap(total)
	e.log.Warn("reactor queue full, events not reacted to",
		zap.String("tag", tag), zap.Uint64("dropped", total-prev), zap.Uint64("dropped_total", total),
		zap.Int("reactor_worker_hwm", e.opts.Queue))
	if !strings.HasPrefix(tag, ownPrefix) {
		e.fire(TagOverflow, map[string]any{
			"tag": tag, "dropped": total - prev, "dropped_total": total, "queue": e.opts.Queue,
		})
	}
}

func (e *Engine) fire(tag string, data map[string]any) {
	if e.opts.Fire != nil {
		e.opts.Fire(tag, data)
	}
}

// eventDepth is the depth of the reaction that started the call ev
// belongs to, 0 for an outside event.
func (e *Engine) eventDepth(tag string) int {
	if !strings.HasPrefix(tag, "salt/") {
		return 0
	}
	parts := strings.SplitN(tag, "/", 4)
	if len(parts) < 3 || (parts[1] != "job" && parts[1] != "run" && parts[1] != "wheel") {
		return 0
	}
	e.depthMu.Lock()
	d := e.depths[parts[2]]
	e.depthMu.Unlock()
	return d.depth
}

const depthKeep = 10 * time.Minute

func (e *Engine) recordDepth(jid string, depth int) {
	if jid == "" {
		return
	}
	now := time.Now()
	e.depthMu.Lock()
	defer e.depthMu.Unlock()
	if len(e.depths) >= 100000 {
		for k, v := range e.depths {
			if now.Sub(v.at) > depthKeep {
				delete(e.depths, k)
			}
		}
	}
	e.depths[jid] = depthEntry{depth: depth, at: now}
}

func (e *Engine) worker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-e.queue:
			e.react(ctx, w)
		}
	}
}

// react renders every file of the matched rules and dispatches the
// reactions, in order.
func (e *Engine) react(ctx context.Context, w work) {
	e.mu.RLock()
	rules := e.rules
	e.mu.RUnlock()
	own := strings.HasPrefix(w.ev.Tag, ownPrefix)
	if e.debug {
		if ce := e.log.Check(zap.DebugLevel, "Compiling reactions for tag "+w.ev.Tag); ce != nil {
			ce.Write()
		}
	}
	for _, i := range w.rules {
		if i >= len(rules) {
			continue // the rules changed since the match
		}
		for _, path := range rules[i].Files {
			files, err := e.opts.Files.Expand(path)
			if err != nil {
				e.renderError(own, path, 0, w.ev.Tag, err)
				continue
			}
			for _, f := range files {
				reactions, err := e.compile(f, w.ev)
				if err != nil {
					line := 0
					var re *sls.Error
					if errors.As(err, &re) {
						line = re.Line
					}
					e.renderError(own, f, line, w.ev.Tag, err)
					continue
				}
				for _, r := range reactions {
					e.dispatch(ctx, own, w, r)
				}
			}
		}
	}
}

// Reactions renders file for ev and compiles its reactions; it is what a
// worker does for each file, without dispatching.
func (e *Engine) Reactions(file string, ev event.Event) ([]*Reaction, error) {
	return e.compile(file, ev)
}

func (e *Engine) compile(file string, ev event.Event) ([]*Reaction, error) {
	src, err := e.read(file)
	if err != nil {
		return nil, err
	}
	e.stats.rendered.Add(1)
	text, entries, err := e.opts.Renderer.SLS(file, src, ev.Tag, ev.Data)
	if err != nil {
		return nil, err
	}
	if e.debug {
		if ce := e.log.Check(zap.DebugLevel, "Rendered data from file: "+file+":\n"+text); ce != nil {
			ce.Write(zap.String("tag", ev.Tag))
		}
	}
	return Compile(file, ev.Tag, entries)
}

// read returns a file's contents, from memory while its size and
// modification time are unchanged.
func (e *Engine) read(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read reactor file: %w", err)
	}
	e.filesMu.Lock()
	c := e.files[path]
	e.filesMu.Unlock()
	if c != nil && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
		return c.src, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reactor file: %w", err)
	}
	e.filesMu.Lock()
	e.files[path] = &fileEntry{mod: fi.ModTime(), size: fi.Size(), src: src}
	e.filesMu.Unlock()
	return src, nil
}

func (e *Engine) renderError(own bool, file string, line int, tag string, err error) {
	e.stats.renderErrs.Add(1)
	e.log.Error("reactor file failed to render", zap.String("file", file), zap.Int("line", line),
		zap.String("tag", tag), zap.Error(err))
	if !own {
		e.fire(TagRenderError, map[string]any{"file": file, "line": line, "tag": tag, "error": err.Error()})
	}
}

func (e *Engine) dispatch(ctx context.Context, own bool, w work, r *Reaction) {
	depth := w.depth + 1
	if e.opts.MaxDepth > 0 && depth > e.opts.MaxDepth {
		e.stats.looped.Add(1)
		e.log.Warn("reaction refused by the loop guard (reactor_max_depth)", zap.String("file", r.File),
			zap.String("id", r.ID), zap.String("tag", r.Tag), zap.String("fun", r.Type+"."+r.Fun),
			zap.Int("depth", depth), zap.Int("reactor_max_depth", e.opts.MaxDepth))
		if !own {
			e.fire(TagLoop, map[string]any{"file": r.File, "id": r.ID, "tag": r.Tag, "fun": r.Type + "." + r.Fun,
				"depth": depth, "max_depth": e.opts.MaxDepth})
		}
		return
	}
	r.claim = func(jid string) { e.recordDepth(jid, depth) }
	var jid string
	var err error
	if !e.types[r.Type] {
		err = fmt.Errorf("%s reactions do not run here (this reactor runs %s)", r.Type, strings.Join(e.opts.Types, ", "))
	} else {
		jid, err = e.safeDispatch(ctx, r)
	}
	e.stats.reactions.Add(1)
	if err != nil {
		e.stats.failed.Add(1)
		e.log.Error("reaction failed", zap.String("file", r.File), zap.Int("line", r.Line), zap.String("id", r.ID),
			zap.String("tag", r.Tag), zap.String("fun", r.Type+"."+r.Fun), zap.Error(err))
		if !own {
			e.fire(TagError, map[string]any{"file": r.File, "line": r.Line, "id": r.ID, "tag": r.Tag,
				"fun": r.Type + "." + r.Fun, "error": err.Error()})
		}
		return
	}
	e.recordDepth(jid, depth)
	if ce := e.log.Check(zap.DebugLevel, "reaction dispatched"); ce != nil {
		ce.Write(zap.String("id", r.ID), zap.String("fun", r.Type+"."+r.Fun), zap.String("jid", jid),
			zap.Duration("since_event", time.Since(w.seen)))
	}
}

func (e *Engine) safeDispatch(ctx context.Context, r *Reaction) (jid string, err error) {
	defer func() {
		if p := recover(); p != nil {
			jid, err = "", fmt.Errorf("%s.%s crashed: %v", r.Type, r.Fun, p)
		}
	}()
	return e.opts.Dispatch(ctx, r)
}
