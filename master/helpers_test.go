package master

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/targets"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = 20 * time.Second

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, waitTimeout, what, cond)
}

// shortDir is a temporary directory with a short path, for unix sockets
// (whose paths are limited to about 108 bytes; t.TempDir holds the test's
// name).
func shortDir(t *testing.T) string { return testwait.ShortDir(t) }

// recorder keeps the events of a bus for tests to wait on, including
// events fired before the test looked for them.
type recorder struct {
	sub  *event.Subscription
	seen []event.Event
}

// wait returns the data of the first event, seen or to come, whose tag
// matches the glob tag and whose data satisfies match (nil: any).
func (r *recorder) wait(t *testing.T, tag string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	ok := func(ev event.Event) bool {
		return targets.MatchGlob(tag, ev.Tag) && (match == nil || match(ev.Data))
	}
	for _, ev := range r.seen {
		if ok(ev) {
			return ev.Data
		}
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, open := <-r.sub.C():
			if !open {
				t.Fatalf("event bus closed while waiting for %s", tag)
			}
			r.seen = append(r.seen, ev)
			if ok(ev) {
				return ev.Data
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for event %s", waitTimeout, tag)
		}
	}
}

// idIs matches event data whose "id" is id and whose other keys hold the
// given values.
func idIs(id string, kv ...any) func(map[string]any) bool {
	return func(d map[string]any) bool {
		if d["id"] != id {
			return false
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if d[kv[i].(string)] != kv[i+1] {
				return false
			}
		}
		return true
	}
}

// testMaster is a master running in the test's process.
type testMaster struct {
	*Master
	sock   string
	events *recorder
	stop   func() error // cancels Run and returns its error
}

// startMaster runs a master on 127.0.0.1 with a random port. setup may
// change the configuration; beforeRun sees the master before Run.
func startMaster(t *testing.T, setup func(*config.Master), beforeRun func(*Master)) *testMaster {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultMaster()
	cfg.RootDir = dir
	cfg.Interface = "127.0.0.1"
	cfg.Port = 0
	cfg.PkiDir = filepath.Join(dir, "pki")
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.SockDir = shortDir(t)
	cfg.LogFile = ""
	cfg.Timeout = 10
	cfg.ID = "testmaster"
	if setup != nil {
		setup(cfg)
	}
	m, err := New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named("master"))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tm := &testMaster{Master: m, sock: cfg.SocketPath(), events: &recorder{sub: m.Bus().Subscribe("*", 1<<16)}}
	if beforeRun != nil {
		beforeRun(m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	var runErr error
	tm.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(waitTimeout):
				runErr = errors.New("Run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := tm.stop(); err != nil {
			t.Errorf("master Run: %v", err)
		}
	})
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("master Run returned before listening: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("master not ready")
	}
	return tm
}

// testAgent is an agent running in the test's process.
type testAgent struct {
	*agent.Agent
	id   string
	pki  string       // its pki_dir: its identity
	stop func() error // cancels Run and returns its error
}

// startAgent runs an agent with the given id and static grains, connecting
// to tm.
func (tm *testMaster) startAgent(t *testing.T, id string, grains map[string]any) *testAgent {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultAgent()
	cfg.ID = id
	cfg.RootDir = dir
	cfg.Master = []string{tm.Addr().String()}
	cfg.PkiDir = filepath.Join(dir, "pki")
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.SockDir = shortDir(t)
	cfg.LogFile = ""
	cfg.AcceptanceWaitTime = 1 // retry a pending key at once
	cfg.Grains = grains
	a, err := agent.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named("agent."+id))
	if err != nil {
		t.Fatalf("agent.New %s: %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	ta := &testAgent{Agent: a, id: id, pki: cfg.PkiDir}
	var once sync.Once
	var runErr error
	ta.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(waitTimeout):
				runErr = errors.New("Run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() {
		if err := ta.stop(); err != nil {
			t.Errorf("agent %s Run: %v", id, err)
		}
	})
	return ta
}

// waitConnected waits until every id has a live session on the master.
func (tm *testMaster) waitConnected(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		waitFor(t, id+" connected", func() bool { return tm.minions.session(id) != nil })
	}
}

func (tm *testMaster) call(t *testing.T, op, fun string, arg []any, kwarg map[string]any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return api.Call(ctx, tm.sock, &api.Request{Op: op, Fun: fun, Arg: arg, Kwarg: kwarg, User: "tester"})
}

// run calls a runner and fails the test on error.
func (tm *testMaster) run(t *testing.T, fun string, arg ...any) any {
	t.Helper()
	res, err := tm.call(t, api.OpRunner, fun, arg, nil)
	if err != nil {
		t.Fatalf("runner %s %v: %v", fun, arg, err)
	}
	return res
}

// wheel calls a wheel function and fails the test on error.
func (tm *testMaster) wheel(t *testing.T, fun string, arg ...any) any {
	t.Helper()
	res, err := tm.call(t, api.OpWheel, fun, arg, nil)
	if err != nil {
		t.Fatalf("wheel %s %v: %v", fun, arg, err)
	}
	return res
}

// publish sends a publish request and returns every response up to the
// one marked Done.
func (tm *testMaster) publish(t *testing.T, req *api.Request) []*api.Response {
	t.Helper()
	req.Op = api.OpPublish
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := api.Dial(ctx, tm.sock, req)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	var out []*api.Response
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish %s %s: after %d responses: %v", req.Tgt, req.Fun, len(out), err)
		}
		out = append(out, r)
		if r.Done {
			return out
		}
	}
}

// strs turns a decoded list into sorted strings.
func strs(t *testing.T, v any) []string {
	t.Helper()
	l, ok := v.([]any)
	if !ok && v != nil {
		t.Fatalf("got %T %v, want a list", v, v)
	}
	out := []string{}
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			t.Fatalf("got list item %T %v, want a string", x, x)
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// dict asserts v is a dictionary.
func dict(t *testing.T, v any) map[string]any {
	t.Helper()
	d, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("got %T %v, want a dictionary", v, v)
	}
	return d
}
