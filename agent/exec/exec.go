package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/grains"
)

// Salt's exit codes for a job's retcode.
const (
	RetcodeOK      = 0 // EX_OK
	RetcodeGeneric = 1 // EX_GENERIC: a failed function, unknown function or bad arguments
)

// Request is one job for the executor, as the master published it.
type Request struct {
	JID     string
	Fun     string
	Args    []any          // positional arguments, already typed
	Kwargs  map[string]any // key=value arguments; keys starting with "__" are ignored
	Timeout time.Duration  // 0: no limit
	// Deadline, when set, is when the job times out instead of Timeout
	// after it starts (a function of a compound job gets what is left of
	// the job's Timeout, which its timeout message still names).
	Deadline time.Time

	// Optional, shown by saltutil.running and saltutil.find_job.
	Tgt     string
	TgtType string
	User    string
}

// SaltArgs returns the arguments in Salt's packed form: the positional
// arguments followed, when there are kwargs, by one map holding them with
// "__kwarg__": true. This is the shape of Salt's "arg" and "fun_args".
func (r Request) SaltArgs() []any {
	out := make([]any, 0, len(r.Args)+1)
	out = append(out, r.Args...)
	if len(r.Kwargs) > 0 {
		kw := make(map[string]any, len(r.Kwargs)+1)
		for k, v := range r.Kwargs {
			kw[k] = v
		}
		kw["__kwarg__"] = true
		out = append(out, kw)
	}
	return out
}

// Result is the outcome of a job, Salt's return/retcode/success. Return may
// share memory with the grains snapshot or the executor: treat it as
// read-only.
type Result struct {
	Return  any
	Retcode int
	Success bool
}

// Options configure an Executor.
type Options struct {
	ID      string        // the agent's id
	Version string        // returned by test.version
	Grains  *grains.Store // nil: collected once in New
	Log     *zap.Logger   // nil: no logging
	// OnGrainsRefresh, when set, is called with the new grains after
	// saltutil.refresh_grains, so the agent can send them to its master.
	OnGrainsRefresh func(map[string]any)
	// Opts are the agent's options by Salt's names (Salt's __opts__),
	// read by config.get; nil: none.
	Opts map[string]any
	// Host is handed to external functions (Register); the agent sets it
	// to itself.
	Host any
	// Pillar is the device's pillar in memory, read by pillar.* and
	// config.get; nil: empty. FetchPillar asks the master for a fresh one
	// (pillar.items); nil: Pillar's. RefreshPillar is
	// saltutil.refresh_pillar's work; nil: nothing to refresh.
	Pillar        func() map[string]any
	FetchPillar   func(ctx context.Context) (map[string]any, error)
	RefreshPillar func(ctx context.Context, wait bool, timeout time.Duration, cleanCache bool) bool
	// Files is the master's file server for cp.* (the running agent's
	// FileQuery client); nil: the local file_roots (NewLocalFiles).
	Files FileClient
}

// Executor runs execution functions for jobs. It is safe for concurrent use;
// every Run is independent and registered as running until it returns.
type Executor struct {
	id        string
	version   string
	grains    *grains.Store
	log       *zap.Logger
	onRefresh func(map[string]any)
	opts      map[string]any

	pillar        func() map[string]any
	fetchPillar   func(ctx context.Context) (map[string]any, error)
	refreshPillar func(ctx context.Context, wait bool, timeout time.Duration, cleanCache bool) bool
	files         FileClient
	host          any
	pid           int

	mu   sync.Mutex
	seq  uint64
	jobs map[uint64]*job
}

// job is a running job, as listed by saltutil.running.
type job struct {
	seq     uint64
	req     Request
	cancel  context.CancelCauseFunc
	started time.Time
}

// Causes of a job's context ending early.
var (
	errKilled  = errors.New("killed by saltutil.kill_job")
	errTimeout = errors.New("job timeout")
)

// New returns an Executor with every registered module.
func New(opts Options) *Executor {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	g := opts.Grains
	if g == nil {
		g = grains.New(opts.ID, nil, log.Named("grains"))
	}
	return &Executor{
		id:        opts.ID,
		version:   opts.Version,
		grains:    g,
		log:       log,
		onRefresh: opts.OnGrainsRefresh,
		opts:      opts.Opts,
		host:      opts.Host,
		pid:       os.Getpid(),

		pillar:        opts.Pillar,
		fetchPillar:   opts.FetchPillar,
		refreshPillar: opts.RefreshPillar,
		files:         opts.Files,
		jobs:          make(map[uint64]*job),
	}
}

// Functions returns the names of every function, sorted.
func (e *Executor) Functions() []string {
	return sortedKeys(registry)
}

// Doc returns a function's documentation.
func (e *Executor) Doc(fun string) (string, bool) {
	f, ok := registry[fun]
	if !ok {
		return "", false
	}
	return f.doc, true
}

// Run runs one job and returns its result; it blocks until the function
// returns, the job's timeout passes, the job is killed or ctx is done. It
// never panics: every failure is a Result with Success false.
func (e *Executor) Run(ctx context.Context, req Request) (res Result) {
	start := time.Now()
	f, ok := registry[req.Fun]
	if !ok {
		res = e.missing(req.Fun)
		e.log.Debug("job for unknown function", zap.String("jid", req.JID), zap.String("fun", req.Fun))
		return res
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if req.Timeout > 0 || !req.Deadline.IsZero() {
		deadline := req.Deadline
		if deadline.IsZero() {
			deadline = start.Add(req.Timeout)
		}
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, deadline, errTimeout)
		defer stop()
	}
	j := e.track(req, cancel)
	defer e.untrack(j)

	defer func() {
		if r := recover(); r != nil {
			e.log.Error("execution function panicked", zap.String("jid", req.JID), zap.String("fun", req.Fun),
				zap.String("panic", fmt.Sprint(r)), zap.ByteString("stack", debug.Stack()))
			res = Result{Return: fmt.Sprintf("The minion function caused an exception: %v", r), Retcode: RetcodeGeneric}
		}
	}()
	defer func() {
		e.log.Debug("job done", zap.String("jid", req.JID), zap.String("fun", req.Fun),
			zap.Int("retcode", res.Retcode), zap.Duration("took", time.Since(start)))
	}()

	c, err := bind(req.Fun, f, req.Args, req.Kwargs)
	if err != nil {
		return failed(req.Fun, f, err)
	}
	c.e, c.job = e, j
	ret, err := f.run(ctx, c)
	if err != nil {
		if ctx.Err() != nil {
			return e.interrupted(ctx, req)
		}
		return failed(req.Fun, f, err)
	}
	rc := c.retcode
	if rc == RetcodeOK && dictFailed(ret) {
		rc = RetcodeGeneric
	}
	return Result{Return: ret, Retcode: rc, Success: rc == RetcodeOK}
}

// failed renders a function's error as Salt's minion does.
func failed(fun string, f *function, err error) Result {
	var msg string
	var ie *invocationError
	var ce *commandError
	var ae *argError
	switch {
	case errors.As(err, &ae):
		msg = fmt.Sprintf("Passed invalid arguments to %s: %s\n\n%s", fun, ae.msg, f.doc)
	case errors.As(err, &ie):
		msg = fmt.Sprintf("ERROR executing '%s': %s", fun, ie.msg)
	case errors.As(err, &ce):
		msg = "ERROR: " + ce.msg
	default:
		msg = fmt.Sprintf("ERROR executing '%s': %v", fun, err)
	}
	return Result{Return: msg, Retcode: RetcodeGeneric}
}

// interrupted is the result of a job whose context ended before it did.
func (e *Executor) interrupted(ctx context.Context, req Request) Result {
	var msg string
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errKilled):
		msg = fmt.Sprintf("ERROR: job %s was killed by saltutil.kill_job", req.JID)
	case errors.Is(cause, errTimeout):
		msg = fmt.Sprintf("ERROR: job %s (%s) timed out after %s", req.JID, req.Fun, req.Timeout)
	default:
		msg = fmt.Sprintf("ERROR: job %s (%s) was cancelled: %v", req.JID, req.Fun, cause)
	}
	return Result{Return: msg, Retcode: RetcodeGeneric}
}

// dictFailed is Salt's check of a dict return with a false "result" or
// "success" key.
func dictFailed(ret any) bool {
	m, ok := ret.(map[string]any)
	if !ok {
		return false
	}
	for _, k := range []string{"result", "success"} {
		if v, ok := m[k]; ok && v == false {
			return true
		}
	}
	return false
}

// missing is Salt's return for an unknown function: the docs of the
// functions that start with its name plus the "not available" message, or
// just the message.
func (e *Executor) missing(fun string) Result {
	msg := fmt.Sprintf("'%s' is not available.", fun)
	docs := docs([]string{fun + "*"})
	if len(docs) == 0 {
		return Result{Return: msg, Retcode: RetcodeGeneric}
	}
	docs[fun] = msg
	return Result{Return: docs, Retcode: RetcodeGeneric}
}

// track registers a running job; untrack removes it.
func (e *Executor) track(req Request, cancel context.CancelCauseFunc) *job {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	j := &job{seq: e.seq, req: req, cancel: cancel, started: time.Now()}
	e.jobs[j.seq] = j
	return j
}

func (e *Executor) untrack(j *job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.jobs, j.seq)
}

// running lists the running jobs other than self, oldest first, in Salt's
// shape.
func (e *Executor) running(self *job) []any {
	e.mu.Lock()
	js := make([]*job, 0, len(e.jobs))
	for _, j := range e.jobs {
		if j != self {
			js = append(js, j)
		}
	}
	e.mu.Unlock()
	sort.Slice(js, func(a, b int) bool { return js[a].seq < js[b].seq })
	out := make([]any, 0, len(js))
	for _, j := range js {
		out = append(out, e.jobData(j))
	}
	return out
}

// jobData is a running job as Salt's proc file describes it.
func (e *Executor) jobData(j *job) map[string]any {
	tgtType := j.req.TgtType
	if tgtType == "" && j.req.Tgt != "" {
		tgtType = "glob"
	}
	return map[string]any{
		"jid": j.req.JID, "fun": j.req.Fun, "arg": j.req.SaltArgs(), "pid": e.pid,
		"tgt": j.req.Tgt, "tgt_type": tgtType, "user": j.req.User, "ret": "",
		"_stamp": j.started.UTC().Format("2006-01-02T15:04:05.000000"),
	}
}

// kill cancels every running job with jid other than self and reports
// how many it cancelled.
func (e *Executor) kill(jid string, self *job) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, j := range e.jobs {
		if j.req.JID == jid && j != self {
			j.cancel(errKilled)
			n++
		}
	}
	return n
}

// docs is sys.doc's selection: every function when names is empty; else for
// each name a glob (with *), a module ("test" or "test.") or a function.
func docs(names []string) map[string]any {
	out := make(map[string]any)
	for _, fun := range selectFunctions(names) {
		out[fun] = registry[fun].doc
	}
	return out
}

// selectFunctions returns the sorted names that names select, as Salt's
// sys.list_functions and sys.doc do.
func selectFunctions(names []string) []string {
	all := sortedKeys(registry)
	if len(names) == 0 {
		return all
	}
	seen := make(map[string]bool)
	var out []string
	for _, n := range names {
		for _, fun := range all {
			if seen[fun] || !selects(n, fun) {
				continue
			}
			seen[fun] = true
			out = append(out, fun)
		}
	}
	sort.Strings(out)
	return out
}

func selects(pattern, fun string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		ok, err := path.Match(pattern, fun)
		return err == nil && ok
	}
	if pattern == "" {
		return true
	}
	prefix := pattern
	if !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	return fun == pattern || strings.HasPrefix(fun, prefix)
}
