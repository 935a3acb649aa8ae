package exec

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A module that exists only in tests, to exercise the executor's guards.
func init() {
	register(module{name: "halitetest", funcs: []function{
		{name: "panic", doc: "Panic.", run: func(context.Context, *call) (any, error) { panic("boom") }},
		{name: "failed_dict", doc: "Return a dict with result False.", run: func(context.Context, *call) (any, error) {
			return map[string]any{"result": false, "comment": "nope"}, nil
		}},
		{name: "plain_error", doc: "Fail with a plain error.", run: func(context.Context, *call) (any, error) {
			return nil, errors.New("disk on fire")
		}},
	}})
}

const testVersion = "0.1.0-test"

// newTestExecutor returns an Executor whose grains have static roles and
// whose grain refreshes are sent on the returned channel.
func newTestExecutor(t *testing.T) (*Executor, chan map[string]any) {
	t.Helper()
	log := zap.NewNop()
	static := map[string]any{"roles": []any{"camera", "outdoor"}, "site": map[string]any{"name": "lyon"}}
	refreshed := make(chan map[string]any, 4)
	e := New(Options{
		ID:              "cam-01",
		Version:         testVersion,
		Grains:          grains.New("cam-01", static, log),
		Log:             log,
		OnGrainsRefresh: func(g map[string]any) { refreshed <- g },
	})
	return e, refreshed
}

func run(t *testing.T, e *Executor, fun string, args []any, kwargs map[string]any) Result {
	t.Helper()
	return e.Run(context.Background(), Request{JID: "20260101000000000001", Fun: fun, Args: args, Kwargs: kwargs})
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

func TestTestModule(t *testing.T) {
	e, _ := newTestExecutor(t)
	tests := []struct {
		name   string
		fun    string
		args   []any
		kwargs map[string]any
		want   Result
	}{
		{"ping", "test.ping", nil, nil, Result{Return: true, Success: true}},
		{"version", "test.version", nil, nil, Result{Return: testVersion, Success: true}},
		{"echo string", "test.echo", []any{"foo bar"}, nil, Result{Return: "foo bar", Success: true}},
		{"echo keeps type", "test.echo", []any{int64(3)}, nil, Result{Return: int64(3), Success: true}},
		{"echo by keyword", "test.echo", nil, map[string]any{"text": "kw"}, Result{Return: "kw", Success: true}},
		{"arg", "test.arg", []any{1, "two", 3.5}, map[string]any{"txt": "hello", "__pub_jid": "x"},
			Result{Return: map[string]any{"args": []any{1, "two", 3.5}, "kwargs": map[string]any{"txt": "hello"}}, Success: true}},
		{"arg empty", "test.arg", nil, nil,
			Result{Return: map[string]any{"args": []any{}, "kwargs": map[string]any{}}, Success: true}},
		{"arg packed kwargs", "test.arg", []any{"a", map[string]any{"__kwarg__": true, "k": "v"}}, nil,
			Result{Return: map[string]any{"args": []any{"a"}, "kwargs": map[string]any{"k": "v"}}, Success: true}},
		{"sleep", "test.sleep", []any{0.01}, nil, Result{Return: true, Success: true}},
		{"sleep string", "test.sleep", []any{"0"}, nil, Result{Return: true, Success: true}},
		{"retcode", "test.retcode", []any{3}, nil, Result{Return: true, Retcode: 3}},
		{"retcode zero", "test.retcode", []any{0}, nil, Result{Return: true, Success: true}},
		{"dict with result false fails", "halitetest.failed_dict", nil, nil,
			Result{Return: map[string]any{"result": false, "comment": "nope"}, Retcode: 1}},
		{"plain error", "halitetest.plain_error", nil, nil,
			Result{Return: "ERROR executing 'halitetest.plain_error': disk on fire", Retcode: 1}},
		{"panic", "halitetest.panic", nil, nil,
			Result{Return: "The minion function caused an exception: boom", Retcode: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, tt.fun, tt.args, tt.kwargs)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("%s: result (-want +got):\n%s", tt.fun, d)
			}
		})
	}
}

func TestBadArguments(t *testing.T) {
	e, _ := newTestExecutor(t)
	tests := []struct {
		name       string
		fun        string
		args       []any
		kwargs     map[string]any
		wantPrefix string
	}{
		{"too many", "test.echo", []any{"a", "b"}, nil,
			"Passed invalid arguments to test.echo: test.echo() takes 1 positional argument but 2 were given\n\nReturn the argument"},
		{"none allowed", "test.ping", []any{"a"}, nil,
			"Passed invalid arguments to test.ping: test.ping() takes 0 positional arguments but 1 was given"},
		{"range", "grains.get", []any{"a", "b", ":", true, "x"}, nil,
			"Passed invalid arguments to grains.get: grains.get() takes from 1 to 4 positional arguments but 5 were given"},
		{"missing", "test.echo", nil, nil,
			"Passed invalid arguments to test.echo: test.echo() missing 1 required positional argument: 'text'"},
		{"twice", "test.echo", []any{"a"}, map[string]any{"text": "b"},
			"Passed invalid arguments to test.echo: test.echo() got multiple values for argument 'text'"},
		{"unknown kwargs", "test.ping", nil, map[string]any{"foo": "bar", "baz": 1, "__pub_fun": "x"},
			"ERROR executing 'test.ping': The following keyword arguments are not valid: baz=1, foo=bar"},
		{"not a number", "test.sleep", []any{"soon"}, nil,
			"ERROR executing 'test.sleep': length must be a number of seconds, not soon"},
		{"not a string", "cmd.run", []any{map[string]any{"a": 1}}, nil,
			"ERROR executing 'cmd.run': cmd must be a string, not dict"},
		{"runas", "cmd.run", []any{"id"}, map[string]any{"runas": "nobody"},
			"ERROR executing 'cmd.run': runas is not supported by halite-agent"},
		{"bad env", "cmd.run", []any{"env"}, map[string]any{"env": 5},
			"ERROR executing 'cmd.run': env must be a dict or a list of dicts, not int"},
		{"bad cwd", "cmd.run_all", []any{"pwd"}, map[string]any{"cwd": "/does/not/exist"},
			"ERROR: Specified cwd '/does/not/exist' either not absolute or does not exist"},
		{"relative cwd", "cmd.run", []any{"pwd"}, map[string]any{"cwd": "."},
			"ERROR: Specified cwd '.' either not absolute or does not exist"},
		{"missing shell", "cmd.run", []any{"true"}, map[string]any{"shell": "/no/such/shell"},
			"ERROR: Unable to run command 'true' with shell '/no/such/shell', reason:"},
		{"bad code", "test.retcode", []any{"x"}, nil,
			"ERROR executing 'test.retcode': code must be an integer, not x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, tt.fun, tt.args, tt.kwargs)
			msg, _ := got.Return.(string)
			if !strings.HasPrefix(msg, tt.wantPrefix) || got.Success || got.Retcode != RetcodeGeneric {
				t.Errorf("%s%v: got %#v, want a failed return (retcode 1) starting %q", tt.fun, tt.args, got, tt.wantPrefix)
			}
		})
	}
}

func TestUnknownFunction(t *testing.T) {
	e, _ := newTestExecutor(t)
	got := run(t, e, "foo.bar", nil, nil)
	want := Result{Return: "'foo.bar' is not available.", Retcode: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("foo.bar (-want +got):\n%s", d)
	}

	// As Salt, a name that prefixes known functions returns their docs too.
	got = run(t, e, "test.pin", nil, nil)
	doc, _ := e.Doc("test.ping")
	want = Result{Return: map[string]any{"test.pin": "'test.pin' is not available.", "test.ping": doc}, Retcode: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("test.pin (-want +got):\n%s", d)
	}
}

func TestJobTimeout(t *testing.T) {
	e, _ := newTestExecutor(t)
	start := time.Now()
	got := e.Run(context.Background(), Request{JID: "20260101000000000002", Fun: "test.sleep",
		Args: []any{60}, Timeout: 50 * time.Millisecond})
	want := Result{Return: "ERROR: job 20260101000000000002 (test.sleep) timed out after 50ms", Retcode: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("timed-out job (-want +got):\n%s", d)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("timed-out job took %s, want it ended near its 50ms timeout", took)
	}
	if n := len(e.running(nil)); n != 0 {
		t.Errorf("running jobs after timeout: got %d, want 0", n)
	}
}

// TestConcurrentJobs starts many jobs at once, waits until all are listed as
// running together, then cancels them through the parent context.
func TestConcurrentJobs(t *testing.T) {
	e, _ := newTestExecutor(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	results := make([]Result, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fun, args := "test.sleep", []any{60}
			if i%2 == 1 {
				fun, args = "cmd.run", []any{"sleep 60"}
			}
			results[i] = e.Run(ctx, Request{JID: "2026010100000000010" + string(rune('0'+i%10)), Fun: fun, Args: args})
		}()
	}
	waitFor(t, "20 jobs running at once", func() bool { return len(e.running(nil)) == n })
	cancel()
	wg.Wait()
	for i, r := range results {
		msg, _ := r.Return.(string)
		if r.Success || !strings.Contains(msg, "was cancelled: context canceled") {
			t.Errorf("job %d: got %#v, want a cancelled failure", i, r)
		}
	}
	if n := len(e.running(nil)); n != 0 {
		t.Errorf("running jobs after cancel: got %d, want 0", n)
	}
}

func TestRequestSaltArgs(t *testing.T) {
	got := Request{Args: []any{"a", 1}, Kwargs: map[string]any{"k": "v"}}.SaltArgs()
	want := []any{"a", 1, map[string]any{"k": "v", "__kwarg__": true}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("SaltArgs (-want +got):\n%s", d)
	}
	if got := (Request{}).SaltArgs(); got == nil || len(got) != 0 {
		t.Errorf("SaltArgs of no arguments: got %#v, want an empty, non-nil list", got)
	}
}
