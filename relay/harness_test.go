package relay

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/agent"
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

// waitTimeout bounds every wait of these tests (generous: a loaded 2-core
// machine under -race).
const waitTimeout = 30 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, waitTimeout, what, cond)
}

func shortDir(t *testing.T) string { return testwait.ShortDir(t) }

// runner runs a component's Run in a goroutine; stop cancels it and
// returns its error.
type runner struct {
	once   sync.Once
	cancel context.CancelFunc
	done   chan error
	err    error
}

func start(t *testing.T, name string, run func(context.Context) error) *runner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("%s Run: %v", name, err)
		}
	})
	return r
}

func (r *runner) stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(waitTimeout):
			r.err = errors.New("Run did not return after its context was cancelled")
		}
	})
	return r.err
}

// testMaster is a master in the test's process, restartable on its port.
type testMaster struct {
	*master.Master
	cfg  *config.Master
	sock string
	run  *runner

	mu   sync.Mutex
	seen []event.Event
	sub  *event.Subscription
}

func startMaster(t *testing.T, autoAccept bool) *testMaster {
	t.Helper()
	return startMasterWith(t, autoAccept, nil)
}

// startMasterWith is startMaster; setup may change the configuration
// before the master starts.
func startMasterWith(t *testing.T, autoAccept bool, setup func(*config.Master)) *testMaster {
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
	cfg.AutoAccept = autoAccept
	cfg.ID = "testmaster"
	cfg.RelayAllow = []string{"r1", "r2", "evil"} // evil: the hand-made relay of batch_test.go
	if setup != nil {
		setup(cfg)
	}
	tm := &testMaster{cfg: cfg, sock: cfg.SocketPath()}
	tm.boot(t)
	return tm
}

// boot starts (or restarts) the master on its configured port.
func (tm *testMaster) boot(t *testing.T) {
	t.Helper()
	m, err := master.New(tm.cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("master"))
	if err != nil {
		t.Fatalf("master.New: %v", err)
	}
	tm.Master = m
	tm.mu.Lock()
	tm.sub = m.Bus().Subscribe("*", 1<<16)
	tm.mu.Unlock()
	tm.run = start(t, "master", m.Run)
	select {
	case <-m.Ready():
	case err := <-tm.run.done:
		tm.run.done <- err
		t.Fatalf("master Run returned before listening: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("master not ready")
	}
	tm.cfg.Port = m.Addr().(*net.UDPAddr).Port
}

// waitEvent returns the data of the first event of this master life, seen
// or to come, whose tag matches the glob and whose data satisfies match.
func (tm *testMaster) waitEvent(t *testing.T, tag string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	ok := func(ev event.Event) bool {
		return targets.MatchGlob(tag, ev.Tag) && (match == nil || match(ev.Data))
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	for _, ev := range tm.seen {
		if ok(ev) {
			return ev.Data
		}
	}
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, open := <-tm.sub.C():
			if !open {
				t.Fatalf("event bus closed while waiting for %s", tag)
			}
			tm.seen = append(tm.seen, ev)
			if ok(ev) {
				return ev.Data
			}
		case <-timer.C:
			t.Fatalf("timed out after %v waiting for event %s", waitTimeout, tag)
		}
	}
}

// restart stops the master and starts it again on the same port and data.
func (tm *testMaster) restart(t *testing.T) {
	t.Helper()
	if err := tm.run.stop(); err != nil {
		t.Fatalf("master stop: %v", err)
	}
	tm.mu.Lock()
	tm.seen = nil
	tm.mu.Unlock()
	tm.boot(t)
}

func (tm *testMaster) wheel(t *testing.T, fun string, arg ...any) any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := api.Call(ctx, tm.sock, &api.Request{Op: api.OpWheel, Fun: fun, Arg: arg, User: "tester"})
	if err != nil {
		t.Fatalf("wheel %s %v: %v", fun, arg, err)
	}
	return res
}

// publish runs a job and returns the ids that returned (sorted), their
// returns by id, and the minions reported missing.
func (tm *testMaster) publish(t *testing.T, tgt, fun string, timeout float64, arg ...any) (returned []string, rets map[string]any, missing []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout+time.Duration(timeout)*time.Second)
	defer cancel()
	c, err := api.Dial(ctx, tm.sock, &api.Request{Op: api.OpPublish, Tgt: tgt, TgtType: "compound", Fun: fun, Arg: arg, Timeout: timeout, User: "tester"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	rets = map[string]any{}
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish %s %s: %v", tgt, fun, err)
		}
		switch r.Kind {
		case api.KindReturn:
			id, _ := r.Data["id"].(string)
			returned = append(returned, id)
			rets[id] = r.Data["return"]
		case api.KindError:
			t.Fatalf("publish %s %s: %s", tgt, fun, r.Error)
		}
		if r.Done {
			missing = append(missing, r.Missing...)
			sort.Strings(returned)
			sort.Strings(missing)
			return returned, rets, missing
		}
	}
}

// testRelay is a relay node: an agent with a relay in its process.
type testRelay struct {
	*Relay
	agent   *agent.Agent
	cfg     *config.Agent
	run     *runner
	maxCaps uint32 // plays a master of at most this capability (0: the master's)
	// beforeTakeIn runs between the relay reading a device's accepted
	// status and taking the device in (Relay.beforeTakeIn).
	beforeTakeIn func(id string)
	// holdProxyStatus: Relay.holdProxyStatus.
	holdProxyStatus func(id string) bool
}

func agentConfig(t *testing.T, id string, masters ...string) *config.Agent {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultAgent()
	cfg.ID = id
	cfg.RootDir = dir
	cfg.Master = masters
	cfg.PkiDir = filepath.Join(dir, "pki")
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.SockDir = shortDir(t)
	cfg.LogFile = ""
	cfg.AcceptanceWaitTime = 1
	return cfg
}

// startRelay runs relay id in front of tm; setup may change its relay:
// section; tamper, if set, alters what it forwards; opts change the test
// relay before it starts.
func startRelay(t *testing.T, tm *testMaster, id string, setup func(*config.Relay), tamper func(typ protocol.Type, wire []byte) []byte, opts ...func(*testRelay)) *testRelay {
	t.Helper()
	cfg := agentConfig(t, id, tm.Addr().String())
	cfg.Relay = config.DefaultRelay()
	cfg.Relay.Heartbeat = 1
	if setup != nil {
		setup(cfg.Relay)
	}
	tr := &testRelay{cfg: cfg}
	for _, o := range opts {
		o(tr)
	}
	tr.boot(t, "127.0.0.1:0", tamper)
	return tr
}

func (tr *testRelay) boot(t *testing.T, listen string, tamper func(typ protocol.Type, wire []byte) []byte) {
	t.Helper()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(tr.cfg.ID)
	a, err := agent.New(tr.cfg, log.Named("agent"))
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	r, err := New(Options{Config: tr.cfg, Identity: a.Identity(), Version: agent.Version, Log: log.Named("relay"),
		Event: a.SendEvent, Listen: listen})
	if err != nil {
		t.Fatalf("relay.New: %v", err)
	}
	r.tamper = tamper
	r.maxCaps = tr.maxCaps
	r.beforeTakeIn = tr.beforeTakeIn
	r.holdProxyStatus = tr.holdProxyStatus
	tr.Relay, tr.agent = r, a
	tr.run = start(t, "relay "+tr.cfg.ID, func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		aerr := make(chan error, 1)
		go func() { aerr <- a.Run(ctx) }()
		err := r.Run(ctx)
		cancel()
		return errors.Join(err, <-aerr)
	})
	select {
	case <-r.Ready():
	case <-time.After(waitTimeout):
		t.Fatal("relay not ready")
	}
}

// restart stops the relay and starts it again on the same address.
func (tr *testRelay) restart(t *testing.T) {
	t.Helper()
	addr := tr.Addr().String()
	if err := tr.run.stop(); err != nil {
		t.Fatalf("relay stop: %v", err)
	}
	tr.boot(t, addr, tr.tamper)
}

// startDevice runs a device agent behind relay tr.
func startDevice(t *testing.T, tr *testRelay, id string, grains map[string]any) (*agent.Agent, *runner) {
	t.Helper()
	cfg := agentConfig(t, id, tr.Addr().String())
	cfg.Grains = grains
	return startDeviceCfg(t, cfg)
}

// startDeviceCfg runs a device agent with cfg.
func startDeviceCfg(t *testing.T, cfg *config.Agent) (*agent.Agent, *runner) {
	t.Helper()
	a, err := agent.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)).Named(cfg.ID))
	if err != nil {
		t.Fatalf("agent.New %s: %v", cfg.ID, err)
	}
	return a, start(t, "device "+cfg.ID, a.Run)
}

// asyncJob publishes a job without waiting for its returns.
func asyncJob(t *testing.T, tm *testMaster, tgt, fun string, arg ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := api.Dial(ctx, tm.sock, &api.Request{Op: api.OpPublish, Tgt: tgt, Fun: fun, Arg: arg, Async: true, User: "tester"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish %s %s: %v", tgt, fun, err)
		}
		if r.Kind == api.KindError {
			t.Fatalf("publish %s %s: %s", tgt, fun, r.Error)
		}
		if r.JID != "" {
			return r.JID
		}
		if r.Done {
			t.Fatalf("publish %s %s: no jid", tgt, fun)
		}
	}
}
