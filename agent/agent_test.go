package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/master"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// protocol.Pump's workers wait a while for the next pump before they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/halite-fleet/halite/protocol.pumpWorker"))
}

const waitTimeout = 20 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, waitTimeout, what, cond)
}

// shortDir is a temporary directory with a short path, for unix sockets.
func shortDir(t *testing.T) string { return testwait.ShortDir(t) }

// newTestAgent makes an agent (not running) with its own directories.
func newTestAgent(t *testing.T, id string, grains map[string]any, setup func(*config.Agent)) *Agent {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultAgent()
	cfg.ID = id
	cfg.RootDir = dir
	cfg.PkiDir = filepath.Join(dir, "pki")
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.SockDir = shortDir(t)
	cfg.LogFile = ""
	cfg.AcceptanceWaitTime = 1
	cfg.Grains = grains
	if setup != nil {
		setup(cfg)
	}
	a, err := New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named("agent."+id))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// runUntilStopped runs a in the background; the returned stop cancels it
// and returns Run's error, failing if Run does not return in time.
func runUntilStopped(t *testing.T, name string, run func(context.Context) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitTimeout):
				err = errors.New(name + ": Run did not return after its context was cancelled")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("%s Run: %v", name, err)
		}
	})
	return stop
}

// fakeMasterKey pins a fresh key as the master's and returns it, so tests
// can sign jobs as the master would.
func fakeMasterKey(t *testing.T, a *Agent) *protocol.Identity {
	t.Helper()
	id, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	pub := id.Pub
	a.masterPub.Store(&pub)
	return id
}

func signJob(t *testing.T, key *protocol.Identity, b *protocol.JobBody) *protocol.Job {
	t.Helper()
	j, err := protocol.SignJob(key.Priv, b)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// queued counts the outbox's messages of type typ, in memory and spooled.
func queued(a *Agent, typ protocol.Type) int {
	a.out.mu.Lock()
	n := 0
	for _, m := range a.out.q {
		if m.Type() == typ {
			n++
		}
	}
	a.out.mu.Unlock()
	a.out.spool.mu.Lock()
	defer a.out.spool.mu.Unlock()
	for _, it := range a.out.spool.items {
		if it.kind == typ {
			n++
		}
	}
	return n
}

func TestForMe(t *testing.T) {
	a := newTestAgent(t, "cam-01", map[string]any{"role": "cam", "site": map[string]any{"city": "paris"}}, nil)
	tests := []struct {
		tgt, tgtType, delim string
		want                bool
	}{
		{"cam-*", "glob", "", true},
		{"cam-*", "", "", true},
		{"web*", "glob", "", false},
		{"web1,cam-01", "list", "", true},
		{"web1,web2", "list", "", false},
		{"^cam-\\d+$", "pcre", "", true},
		{"^web", "pcre", "", false},
		{"role:cam", "grain", "", true},
		{"role:web", "grain", "", false},
		{"site:city:paris", "grain", "", true},
		{"site|city|paris", "grain", "|", true},
		{"site:city:lyon", "grain", "", false},
		{"G@role:cam and cam-*", "compound", "", true},
		{"G@role:cam and not cam-01", "compound", "", false},
		// Matched by the master, which alone knows nodegroups and pillar.
		{"cameras", "nodegroup", "", true},
		{"tier:gold", "pillar", "", true},
	}
	for _, tt := range tests {
		got := a.forMe(&protocol.JobBody{JID: "20260101000000000001", Tgt: tt.tgt, TgtType: tt.tgtType, Delimiter: tt.delim, Fun: "test.ping"})
		if got != tt.want {
			t.Errorf("forMe(%q, %q): got %v, want %v", tt.tgt, tt.tgtType, got, tt.want)
		}
	}
}

func TestHandleJob(t *testing.T) {
	a := newTestAgent(t, "cam-01", map[string]any{"role": "cam"}, nil)
	ctx := context.Background()
	job := func(jid, tgt string) *protocol.JobBody {
		return &protocol.JobBody{JID: jid, Tgt: tgt, TgtType: "glob", Fun: "test.ping"}
	}

	// Before the master's key is pinned, nothing runs.
	other, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	a.handleJob(ctx, signJob(t, other, job("20260101000000000001", "*")))
	a.jobWG.Wait()
	if n := queued(a, protocol.TypeReturn); n != 0 {
		t.Fatalf("job before pinning: got %d returns, want 0", n)
	}

	key := fakeMasterKey(t, a)
	steps := []struct {
		name string
		job  *protocol.Job
		want int // returns queued so far
	}{
		{"signed by another key", signJob(t, other, job("20260101000000000002", "*")), 0},
		{"for another agent", signJob(t, key, job("20260101000000000003", "web*")), 0},
		{"for this agent", signJob(t, key, job("20260101000000000004", "cam-*")), 1},
		{"same jid again", signJob(t, key, job("20260101000000000004", "cam-*")), 1},
		{"same job replayed", nil, 1},
		{"another jid", signJob(t, key, job("20260101000000000005", "*")), 2},
		// A refused job does not burn its jid.
		{"refused jid, now for this agent", signJob(t, key, job("20260101000000000003", "cam-01")), 3},
	}
	var last *protocol.Job
	for _, s := range steps {
		j := s.job
		if j == nil {
			j = last
		}
		last = j
		a.handleJob(ctx, j)
		a.jobWG.Wait()
		if got := queued(a, protocol.TypeReturn); got != s.want {
			t.Errorf("%s: got %d returns queued, want %d", s.name, got, s.want)
		}
	}
}

func TestOutbox(t *testing.T) {
	sp, err := openSpool(t.TempDir(), 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	o := newOutbox(3, sp)
	for seq := uint64(1); seq <= 5; seq++ {
		dropped := o.push(&protocol.Pong{Seq: seq})
		if want := seq > 3; dropped != want {
			t.Errorf("push %d: got dropped %v, want %v", seq, dropped, want)
		}
	}
	if o.len() != 3 || o.dropped != 2 {
		t.Fatalf("got len %d, dropped %d, want 3 and 2", o.len(), o.dropped)
	}
	var got []uint64
	for {
		m, ok := o.peek()
		if !ok {
			break
		}
		// Popping another message is a no-op: the head stays.
		o.pop(&protocol.Pong{Seq: 99})
		if m2, _ := o.peek(); m2 != m {
			t.Fatal("pop of a message that is not the head removed the head")
		}
		got = append(got, m.(*protocol.Pong).Seq)
		o.pop(m)
	}
	if d := cmp.Diff([]uint64{3, 4, 5}, got); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
	select {
	case <-o.notify:
	default:
		t.Error("push did not signal notify")
	}
}

func TestMasterless(t *testing.T) {
	a := newTestAgent(t, "solo", nil, func(c *config.Agent) { c.MasterType = "disable" })
	sub := a.bus.Subscribe("local/*", 16)
	defer sub.Close()
	runUntilStopped(t, "agent", a.Run)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var resp *LocalResponse
	waitFor(t, "the local socket", func() bool {
		var err error
		resp, err = LocalCall(ctx, a.cfg.SocketPath(), &LocalRequest{Op: "event.send", Tag: "local/x", Data: map[string]any{"n": "1"}})
		return err == nil
	})
	if !resp.OK || resp.Connected {
		t.Errorf("event.send: got %+v, want ok and not connected", resp)
	}
	select {
	case ev := <-sub.C():
		if ev.Tag != "local/x" || ev.Data["n"] != "1" {
			t.Errorf("local bus: got %s %v, want local/x with n=1", ev.Tag, ev.Data)
		}
	case <-time.After(waitTimeout):
		t.Fatal("no event on the agent's bus")
	}
	resp, err := LocalCall(ctx, a.cfg.SocketPath(), &LocalRequest{Op: "event.send", Tag: "salt/auth"})
	if err != nil || resp.OK || resp.Error == "" {
		t.Errorf("event.send salt/auth: got %+v, %v, want a refusal", resp, err)
	}
	resp, err = LocalCall(ctx, a.cfg.SocketPath(), &LocalRequest{Op: "nosuch"})
	if err != nil || resp.OK || resp.Error == "" {
		t.Errorf("op nosuch: got %+v, %v, want an error", resp, err)
	}
}

// startMaster runs a real master (keys not accepted automatically) and
// returns it with its socket and a subscription to its whole bus.
func startMaster(t *testing.T) (*master.Master, string, *event.Subscription) {
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
	m, err := master.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named("master"))
	if err != nil {
		t.Fatal(err)
	}
	sub := m.Bus().Subscribe("*", 1<<16)
	runUntilStopped(t, "master", m.Run)
	select {
	case <-m.Ready():
	case <-time.After(waitTimeout):
		t.Fatal("master not ready")
	}
	return m, cfg.SocketPath(), sub
}

// waitEvent returns the first event on sub with the given tag.
func waitEvent(t *testing.T, sub *event.Subscription, tag string) event.Event {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-sub.C():
			if !ok {
				t.Fatalf("bus closed while waiting for %s", tag)
			}
			if targets.MatchGlob(tag, ev.Tag) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("timed out waiting for event %s", tag)
		}
	}
}

func call(t *testing.T, sock string, req *api.Request) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := api.Call(ctx, sock, req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Op, req.Fun, err)
	}
	return res
}

// TestWithMaster runs an agent against a real master: what it sends while
// its key waits is delivered once accepted, events keep their shape, and
// the agent stops cleanly while a job runs.
func TestWithMaster(t *testing.T) {
	m, sock, sub := startMaster(t)
	a := newTestAgent(t, "dev1", nil, func(c *config.Agent) { c.Master = []string{m.Addr().String()} })
	stop := runUntilStopped(t, "agent", a.Run)

	waitEvent(t, sub, event.TagAuth)
	// Queued while not accepted: the outbox holds it for the master.
	if err := a.SendEvent("dev/early", map[string]any{"n": "1"}); err != nil {
		t.Fatal(err)
	}
	call(t, sock, &api.Request{Op: api.OpWheel, Fun: "key.accept", Arg: []any{"dev1"}})
	ev := waitEvent(t, sub, "dev/early")
	if _, ok := ev.Data["_stamp"].(string); !ok {
		t.Errorf("event _stamp: got %v, want a string", ev.Data["_stamp"])
	}
	delete(ev.Data, "_stamp")
	want := map[string]any{"id": "dev1", "tag": "dev/early", "data": map[string]any{"n": "1"}}
	if d := cmp.Diff(want, ev.Data); d != "" {
		t.Errorf("event on the master (-want +got):\n%s", d)
	}
	if a.nconn.Load() == 0 {
		t.Error("agent delivered an event but says it is not connected")
	}

	// Through the agent's local socket, as halite-call does.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := LocalCall(ctx, a.cfg.SocketPath(), &LocalRequest{Op: "event.send", Tag: "dev/local", Data: map[string]any{"k": "v"}})
	if err != nil || !resp.OK || !resp.Connected {
		t.Fatalf("local event.send: got %+v, %v, want ok and connected", resp, err)
	}
	if ev := waitEvent(t, sub, "dev/local"); ev.Data["id"] != "dev1" {
		t.Errorf("local event: got id %v, want dev1", ev.Data["id"])
	}

	c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: "dev1", Fun: "test.sleep", Arg: []any{60}, Async: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Next()
	c.Close()
	if err != nil || r.Kind != api.KindJob {
		t.Fatalf("publish test.sleep: got %+v, %v, want a job", r, err)
	}
	waitFor(t, "the agent to run "+r.JID, func() bool {
		_, ok := call(t, sock, &api.Request{Op: api.OpRunner, Fun: "jobs.active"}).(map[string]any)[r.JID]
		return ok
	})
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("agent Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("agent took %v to stop with a job running, want under 5s", d)
	}
}
