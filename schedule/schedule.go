package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/internal/yamlemit"
)

// Options configure a Scheduler.
type Options struct {
	// Config is the schedule: option (job name to options), as loaded.
	Config map[string]any
	// Where, if set, says where a job was configured ("file:line"), for
	// the error that refuses it.
	Where func(name string) string
	// Known reports whether an execution function exists; nil: any.
	Known func(fun string) bool
	// Returner checks a returner: name; nil: any.
	Returner func(name string) error
	// Run runs one firing of a job and returns when it is done.
	Run func(ctx context.Context, j *Job)
	// SaveFile is where Save writes (CONFIG_DIR/agent.d/_schedule.conf).
	SaveFile string
	Log      *zap.Logger
	// Now is the clock, for tests; nil: time.Now.
	Now func() time.Time
}

// entry is a job and its timing.
type entry struct {
	job     *Job
	base    time.Time // the fire time before splay
	fire    time.Time // when it runs next; zero: never (a cron with no match)
	running int
	last    time.Time
}

// Scheduler runs the jobs of a schedule. Make it with New; Run runs it.
type Scheduler struct {
	o    Options
	log  *zap.Logger
	kick chan struct{}

	mu      sync.Mutex
	jobs    map[string]*entry
	enabled bool
	splay   int // the schedule's splay: option, for jobs without their own
	wg      sync.WaitGroup
	runCtx  context.Context // set by Run; a job fired before it starts at Run
	pending []*Job          // run_job before Run
}

// ErrNoJob is the error of an operation on a job that does not exist.
var ErrNoJob = errors.New("no such job")

// New checks the schedule and returns its scheduler. A bad job is an
// error naming it, where it was configured and what is wrong.
func New(o Options) (*Scheduler, error) {
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Scheduler{o: o, log: o.Log, kick: make(chan struct{}, 1), enabled: true}
	jobs, enabled, splay, err := s.parseAll(o.Config)
	if err != nil {
		return nil, err
	}
	s.jobs, s.enabled, s.splay = jobs, enabled, splay
	return s, nil
}

// parseAll parses a whole schedule: option, its top-level enabled and
// splay included.
func (s *Scheduler) parseAll(cfg map[string]any) (map[string]*entry, bool, int, error) {
	jobs := make(map[string]*entry, len(cfg))
	enabled, splay := true, 0
	for _, name := range sortedNames(cfg) {
		v := cfg[name]
		switch name {
		case "enabled":
			b, ok := boolean(v)
			if !ok {
				return nil, false, 0, s.where(name, fmt.Errorf("schedule enabled: expected true or false, got %v", v))
			}
			enabled = b
			continue
		case "splay":
			n, ok := number(v)
			if !ok || n < 0 {
				return nil, false, 0, s.where(name, fmt.Errorf("schedule splay: expected seconds, got %v", v))
			}
			splay = int(n)
			continue
		case "skip_function", "skip_during_range":
			continue
		}
		j, err := Parse(name, v, s.checks())
		if err != nil {
			return nil, false, 0, s.where(name, err)
		}
		jobs[name] = &entry{job: j}
	}
	return jobs, enabled, splay, nil
}

func (s *Scheduler) checks() Checks { return Checks{Function: s.o.Known, Returner: s.o.Returner} }

func (s *Scheduler) where(name string, err error) error {
	if s.o.Where != nil {
		if w := s.o.Where(name); w != "" {
			return fmt.Errorf("%s: schedule %w", w, err)
		}
	}
	return fmt.Errorf("schedule %w", err)
}

func (s *Scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// plan sets e's next fire time from now (first: the schedule starts).
func (s *Scheduler) plan(e *entry, now time.Time, first bool) {
	j := e.job
	if first && j.RunOnStart && j.Cron == nil {
		e.base, e.fire = now, now
		return
	}
	if j.Cron != nil {
		e.base = j.Cron.Next(now)
	} else {
		// Fire times follow each other by the interval, so jobs of one
		// interval stay together (one wake-up for all of them).
		t := e.base.Add(j.Every)
		if e.base.IsZero() || !t.After(now) {
			t = now.Add(j.Every)
		}
		e.base = t
	}
	e.fire = e.base
	if e.base.IsZero() {
		return
	}
	if j.SplayHi > 0 {
		e.fire = e.base.Add(j.splay())
	} else if s.splay > 0 {
		e.fire = e.base.Add((&Job{SplayLo: 1, SplayHi: s.splay}).splay())
	}
}

// Run fires the jobs until ctx ends, then waits for the running ones.
func (s *Scheduler) Run(ctx context.Context) error {
	now := s.o.Now()
	s.mu.Lock()
	s.runCtx = ctx
	for _, e := range s.jobs {
		s.plan(e, now, true)
	}
	for _, j := range s.pending {
		s.start(ctx, s.jobs[j.Name], j)
	}
	s.pending = nil
	s.mu.Unlock()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	defer s.wg.Wait()
	for {
		s.mu.Lock()
		now = s.o.Now()
		var next time.Time
		for _, name := range sortedNames(s.jobs) {
			e := s.jobs[name]
			if e.fire.IsZero() {
				continue
			}
			if !e.fire.After(now) {
				s.fire(ctx, e, now)
			}
			if !e.fire.IsZero() && (next.IsZero() || e.fire.Before(next)) {
				next = e.fire
			}
		}
		s.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = min(next.Sub(now), time.Hour)
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick:
		}
	}
}

// fire runs e if it should run now, and plans its next time. Under s.mu.
func (s *Scheduler) fire(ctx context.Context, e *entry, now time.Time) {
	j := e.job
	run := s.enabled && j.Enabled
	switch {
	case !run:
	case j.Range != nil && !j.Range.In(now):
		run = false
	case j.MaxRunning > 0 && e.running >= j.MaxRunning:
		s.log.Info("scheduled job not run: maxrunning reached", zap.String("job", j.Name), zap.Int("maxrunning", j.MaxRunning))
		run = false
	}
	if run {
		e.last = now
		s.start(ctx, e, j)
	}
	s.plan(e, now, false)
}

// start runs j (e's job, or a copy of it) in its own goroutine. Under s.mu.
func (s *Scheduler) start(ctx context.Context, e *entry, j *Job) {
	if e != nil {
		e.running++
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.o.Run(ctx, j)
		s.mu.Lock()
		if e != nil {
			e.running--
		}
		s.mu.Unlock()
	}()
}

// List returns the schedule as Salt's schedule.list shows it: job name to
// options, only Salt's keys, enabled always set; with the schedule
// disabled, "enabled: false" at the top. showAll shows the jobs whose
// names start with "__"; showDisabled false hides the disabled jobs.
func (s *Scheduler) List(showAll, showDisabled bool) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]any, len(s.jobs)+1)
	for name, e := range s.jobs {
		if len(name) > 1 && name[:2] == "__" && !showAll {
			continue
		}
		if !showDisabled && !e.job.Enabled {
			continue
		}
		out[name] = e.job.listed()
	}
	if !s.enabled {
		out["enabled"] = false
	}
	return out
}

// YAML is the listing as Salt prints it: "schedule:" and the jobs, or
// "schedule: {}".
func YAML(list map[string]any) (string, error) {
	b, err := marshalYAML(map[string]any{"schedule": list})
	return string(b), err
}

// marshalYAML encodes v as Salt's yaml.safe_dump(default_flow_style=False)
// does: block style, two-space indent.
func marshalYAML(v any) ([]byte, error) {
	b, err := yamlemit.Encode(v, yamlemit.Options{Indent: 2})
	if err != nil {
		return nil, fmt.Errorf("encode schedule: %w", err)
	}
	return b, nil
}

// Add adds a job; an existing name or a bad entry is refused.
func (s *Scheduler) Add(name string, data map[string]any) error {
	j, err := Parse(name, data, s.checks())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[name]; ok {
		return fmt.Errorf("job %s already exists in schedule", name)
	}
	s.install(name, j)
	return nil
}

// install puts j under name and plans it. Under s.mu.
func (s *Scheduler) install(name string, j *Job) {
	e := &entry{job: j}
	if old, ok := s.jobs[name]; ok {
		e.running, e.last = old.running, old.last
	}
	if s.runCtx != nil {
		s.plan(e, s.o.Now(), false)
	}
	s.jobs[name] = e
	s.wake()
}

// Modify replaces a job's options with data (Salt's schedule.modify).
func (s *Scheduler) Modify(name string, data map[string]any) error {
	j, err := Parse(name, data, s.checks())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[name]; !ok {
		return fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	s.install(name, j)
	return nil
}

// Get returns a job's options as configured.
func (s *Scheduler) Get(name string) (map[string]any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[name]
	if !ok {
		return nil, false
	}
	return e.job.data, true
}

// Delete removes a job; one running finishes.
func (s *Scheduler) Delete(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[name]; !ok {
		return fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	delete(s.jobs, name)
	return nil
}

// SetEnabled enables or disables one job, or the whole schedule when name
// is "".
func (s *Scheduler) SetEnabled(name string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		s.enabled = on
		s.wake()
		return nil
	}
	e, ok := s.jobs[name]
	if !ok {
		return fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	j := *e.job
	j.Enabled = on
	j.data = make(map[string]any, len(e.job.data))
	for k, v := range e.job.data {
		j.data[k] = v
	}
	j.data["enabled"] = on
	e.job = &j
	s.wake()
	return nil
}

// RunJob runs a job now, once, whatever its schedule (Salt's
// schedule.run_job); a disabled job runs only with force.
func (s *Scheduler) RunJob(name string, force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[name]
	if !ok {
		return fmt.Errorf("job %s: %w", name, ErrNoJob)
	}
	if !e.job.Enabled && !force {
		return fmt.Errorf("job %s is disabled", name)
	}
	if s.runCtx == nil {
		s.pending = append(s.pending, e.job)
		return nil
	}
	s.start(s.runCtx, e, e.job)
	return nil
}

// Check checks cfg as Replace does, changing nothing.
func (s *Scheduler) Check(cfg map[string]any) error {
	_, _, _, err := s.parseAll(cfg)
	return err
}

// Replace swaps the whole schedule for cfg (schedule.reload); a bad entry
// keeps the running schedule and is returned.
func (s *Scheduler) Replace(cfg map[string]any) error {
	jobs, enabled, splay, err := s.parseAll(cfg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.Now()
	for name, e := range jobs {
		if old, ok := s.jobs[name]; ok {
			e.running, e.last = old.running, old.last
		}
		if s.runCtx != nil {
			s.plan(e, now, false)
		}
	}
	s.jobs, s.enabled, s.splay = jobs, enabled, splay
	s.wake()
	return nil
}

// Save writes the schedule to SaveFile as Salt writes _schedule.conf:
// "schedule:" and every job's options.
func (s *Scheduler) Save() (string, error) {
	if s.o.SaveFile == "" {
		return "", fmt.Errorf("no file to save the schedule to")
	}
	s.mu.Lock()
	jobs := make(map[string]any, len(s.jobs)+1)
	for name, e := range s.jobs {
		if len(name) > 1 && name[:2] == "__" {
			continue // the agent's own jobs (__mine_interval), as Salt's remove_hidden
		}
		jobs[name] = e.job.data
	}
	if !s.enabled {
		jobs["enabled"] = false
	}
	s.mu.Unlock()
	b, err := marshalYAML(map[string]any{"schedule": jobs})
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(s.o.SaveFile), 0o755); err != nil {
		return "", fmt.Errorf("save schedule: %w", err)
	}
	if err := atomicfile.Write(s.o.SaveFile, b, 0o644); err != nil {
		return "", fmt.Errorf("save schedule: %w", err)
	}
	return s.o.SaveFile, nil
}

// NextFire returns when a job runs next (zero: not planned).
func (s *Scheduler) NextFire(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[name]
	if !ok {
		return time.Time{}, false
	}
	return e.fire, true
}
