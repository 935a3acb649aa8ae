package schedule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/testwait"
)

// runs counts a scheduler's firings per job.
type runs struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *runs) run(_ context.Context, j *Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[j.Name]++
}

func (r *runs) count(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

// start runs s until the test ends.
func start(t *testing.T, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestSchedulerFires(t *testing.T) {
	var r runs
	s, err := New(Options{Config: map[string]any{
		"every":    map[string]any{"function": "test.ping", "seconds": 1},
		"onstart":  map[string]any{"function": "test.ping", "hours": 1, "run_on_start": true},
		"disabled": map[string]any{"function": "test.ping", "seconds": 1, "enabled": false},
		"later":    map[string]any{"function": "test.ping", "hours": 1},
	}, Known: known, Run: r.run})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	testwait.For(t, 10*time.Second, "3 runs of a 1 s job", func() bool { return r.count("every") >= 3 })
	if got := r.count("onstart"); got != 1 {
		t.Errorf("run_on_start job: got %d runs, want 1", got)
	}
	if got := r.count("disabled") + r.count("later"); got != 0 {
		t.Errorf("disabled and hourly jobs: got %d runs, want 0", got)
	}

	// Disabling the schedule stops every job; run_job still runs one.
	if err := s.SetEnabled("", false); err != nil {
		t.Fatal(err)
	}
	n := r.count("every")
	if err := s.RunJob("later", false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "run_job", func() bool { return r.count("later") == 1 })
	if err := s.RunJob("disabled", false); err == nil {
		t.Errorf("run_job of a disabled job: got no error, want one")
	}
	if err := s.RunJob("nosuch", false); err == nil {
		t.Errorf("run_job of a missing job: got no error, want one")
	}
	// At most one firing was under way when the schedule was disabled.
	next, _ := s.NextFire("every")
	testwait.For(t, 5*time.Second, "a fire time to pass", func() bool { return time.Now().After(next.Add(1500 * time.Millisecond)) })
	if got := r.count("every"); got > n+1 {
		t.Errorf("disabled schedule: job ran %d more times, want at most 1", got-n)
	}
}

// maxrunning (Salt's _check_max_running): a firing while maxrunning runs
// of the job are under way is skipped.
func TestSchedulerMaxRunning(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	s, err := New(Options{Config: map[string]any{
		"slow": map[string]any{"function": "test.ping", "seconds": 1, "run_on_start": true},
	}, Known: known, Run: func(ctx context.Context, j *Job) {
		started.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	start(t, s)
	testwait.For(t, 5*time.Second, "the first run", func() bool { return started.Load() == 1 })
	first, _ := s.NextFire("slow")
	testwait.For(t, 10*time.Second, "two more fire times", func() bool {
		next, _ := s.NextFire("slow")
		return next.Sub(first) >= 2*time.Second
	})
	if got := started.Load(); got != 1 {
		t.Errorf("runs started while one was running (maxrunning 1): got %d, want 1", got)
	}
	close(release)
}

func TestSchedulerChanges(t *testing.T) {
	dir := t.TempDir()
	save := filepath.Join(dir, "agent.d", "_schedule.conf")
	var r runs
	s, err := New(Options{Config: map[string]any{
		"a":               map[string]any{"function": "test.ping", "minutes": 5},
		"__mine_interval": map[string]any{"function": "test.ping", "minutes": 60},
	}, Known: known, Run: r.run, SaveFile: save})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add("a", map[string]any{"function": "test.ping", "seconds": 5}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Add of an existing job: got %v, want already exists", err)
	}
	if err := s.Add("b", map[string]any{"function": "nope.nope", "seconds": 5}); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Errorf("Add of an unknown function: got %v, want not available", err)
	}
	if err := s.Add("b", map[string]any{"function": "test.echo", "seconds": 5, "args": []any{"x"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Modify("nosuch", map[string]any{"function": "test.ping", "seconds": 5}); err == nil {
		t.Errorf("Modify of a missing job: got no error")
	}
	if err := s.SetEnabled("a", false); err != nil {
		t.Fatal(err)
	}
	list := s.List(false, true)
	if _, ok := list["__mine_interval"]; ok {
		t.Errorf("List without show_all shows __mine_interval")
	}
	if a, _ := list["a"].(map[string]any); a["enabled"] != false || a["minutes"] != 5 {
		t.Errorf("List: a = %v, want enabled false, minutes 5", list["a"])
	}
	if _, ok := s.List(false, false)["a"]; ok {
		t.Errorf("List with show_disabled false shows the disabled job a")
	}
	if _, err := s.Save(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	want := "schedule:\n  a:\n    enabled: false\n    function: test.ping\n    jid_include: true\n    maxrunning: 1\n    minutes: 5\n    name: a\n  b:\n    args:\n      - x\n    enabled: true\n    function: test.echo\n    jid_include: true\n    maxrunning: 1\n    name: b\n    seconds: 5\n"
	if string(b) != want {
		t.Errorf("saved schedule:\n%s\nwant\n%s", b, want)
	}
	// Replace with a bad job keeps the running schedule.
	if err := s.Replace(map[string]any{"c": map[string]any{"function": "test.ping"}}); err == nil {
		t.Errorf("Replace with a job without interval: got no error")
	}
	if _, ok := s.Get("b"); !ok {
		t.Errorf("after a refused Replace, job b is gone")
	}
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("b"); err == nil {
		t.Errorf("Delete twice: got no error")
	}
}

func TestNewNamesWhere(t *testing.T) {
	_, err := New(Options{
		Config: map[string]any{"ok": map[string]any{"function": "test.ping", "seconds": 5}, "bad": map[string]any{"function": "test.ping", "seconds": "x"}},
		Where:  func(name string) string { return "/etc/halite/agent:" + map[string]string{"ok": "3", "bad": "7"}[name] },
		Known:  known, Run: func(context.Context, *Job) {},
	})
	if want := "/etc/halite/agent:7: schedule job bad: seconds: expected a number"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("New with a bad job: got %v, want %q...", err, want)
	}
}
