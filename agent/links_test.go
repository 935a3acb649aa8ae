package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// startMasterKeyed starts a master with auto_accept whose key is the one
// in keyFrom's pki dir ("" makes a new one), as the masters of a
// multimaster set share theirs.
func startMasterKeyed(t *testing.T, keyFrom string) (m *master.Master, sock, pki string, sub *event.Subscription) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultMaster()
	cfg.RootDir, cfg.Interface, cfg.Port, cfg.AutoAccept = dir, "127.0.0.1", 0, true
	cfg.PkiDir = filepath.Join(dir, "pki")
	cfg.CacheDir = filepath.Join(dir, "cache")
	cfg.SockDir = shortDir(t)
	cfg.LogFile = ""
	if keyFrom != "" {
		os.MkdirAll(cfg.PkiDir, 0o700)
		for _, f := range []string{"master.pem", "master.pub"} {
			b, err := os.ReadFile(filepath.Join(keyFrom, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cfg.PkiDir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := master.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("master"))
	if err != nil {
		t.Fatal(err)
	}
	sub = m.Bus().Subscribe("*", 1<<16)
	runUntilStopped(t, "master", m.Run)
	select {
	case <-m.Ready():
	case <-time.After(waitTimeout):
		t.Fatal("master not ready")
	}
	return m, cfg.SocketPath(), cfg.PkiDir, sub
}

// publish runs fun on tgt through the master's socket and returns the jid.
func publish(t *testing.T, sock, tgt, fun string, arg ...any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: tgt, Fun: fun, Arg: arg, Async: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Next()
	if err != nil || r.Kind != api.KindJob {
		t.Fatalf("publish %s: %+v, %v", fun, r, err)
	}
	return r.JID
}

// TestHotMasters: an agent with two masters (hot) is connected to both,
// answers each one's jobs to that master only, and sends its events to
// both.
func TestHotMasters(t *testing.T) {
	m1, sock1, pki1, sub1 := startMasterKeyed(t, "")
	m2, sock2, _, sub2 := startMasterKeyed(t, pki1)
	a := newTestAgent(t, "hot1", nil, func(c *config.Agent) {
		c.Master = []string{m1.Addr().String(), m2.Addr().String()}
	})
	if len(a.outs) != 2 {
		t.Fatalf("hot agent has %d outboxes, want one per master", len(a.outs))
	}
	local := a.Subscribe("__master_*", 16)
	defer local.Close()
	runUntilStopped(t, "agent", a.Run)
	joined := map[string]bool{}
	for len(joined) < 2 {
		select {
		case ev := <-local.C():
			if ev.Tag == "__master_connected" {
				joined[ev.Data["master"].(string)] = true
			}
		case <-time.After(waitTimeout):
			t.Fatalf("joined %v, want both masters", joined)
		}
	}
	waitEvent(t, sub1, "salt/minion/hot1/start")
	waitEvent(t, sub2, "salt/minion/hot1/start")

	jid1 := publish(t, sock1, "hot1", "test.echo", "one")
	jid2 := publish(t, sock2, "hot1", "test.echo", "two")
	if jid1 == jid2 {
		t.Fatalf("both masters made jid %s", jid1)
	}
	if ev := waitEvent(t, sub1, event.TagJobRet(jid1, "hot1")); ev.Data["return"] != "one" {
		t.Errorf("master 1's return: %v, want one", ev.Data["return"])
	}
	if ev := waitEvent(t, sub2, event.TagJobRet(jid2, "hot1")); ev.Data["return"] != "two" {
		t.Errorf("master 2's return: %v, want two", ev.Data["return"])
	}
	for _, c := range []struct{ sock, jid string }{{sock2, jid1}, {sock1, jid2}} {
		got := call(t, c.sock, &api.Request{Op: api.OpRunner, Fun: "jobs.lookup_jid", Arg: []any{c.jid}})
		if m, _ := got.(map[string]any); len(m) != 0 {
			t.Errorf("a master has the returns of the other's job %s: %v", c.jid, got)
		}
	}

	if err := a.SendEvent("hot/evt", map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*event.Subscription{sub1, sub2} {
		if ev := waitEvent(t, sub, "hot/evt"); ev.Data["id"] != "hot1" {
			t.Errorf("event id: %v, want hot1", ev.Data["id"])
		}
	}
}

// TestHotMastersKeyMismatch: a master of the list whose key is not the
// others' is refused, with a message that says the masters must share one.
func TestHotMastersKeyMismatch(t *testing.T) {
	m1, _, _, _ := startMasterKeyed(t, "")
	m2, _, _, _ := startMasterKeyed(t, "") // its own key
	a := newTestAgent(t, "hot2", nil, func(c *config.Agent) {
		c.Master = []string{m1.Addr().String(), m2.Addr().String()}
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// The first contact pins one key; the other master is then refused.
	var errs []error
	for _, l := range a.links {
		c, err := a.dial(ctx, l, 0)
		if err == nil {
			c.conn.CloseWithError(0, "")
		}
		errs = append(errs, err)
	}
	var pe *pinError
	if errs[0] != nil || !errors.As(errs[1], &pe) {
		t.Fatalf("dial errors %v, want the second master refused for its key", errs)
	}
	if want := "must share one key"; !strings.Contains(pe.Error(), want) {
		t.Errorf("pin error %q does not say %q", pe, want)
	}
	for _, o := range a.outs {
		o.spool.close()
	}
}

// TestSpoolsFollowTheConfiguration: what waits for a single master moves
// to every master's outbox when the agent becomes hot, and back to the one
// outbox when it switches to failover; nothing is lost on the way.
func TestSpoolsFollowTheConfiguration(t *testing.T) {
	dir := t.TempDir()
	cfg := config.DefaultAgent()
	cfg.ID, cfg.RootDir, cfg.LogFile = "mv1", dir, ""
	cfg.PkiDir, cfg.CacheDir, cfg.SockDir = filepath.Join(dir, "pki"), filepath.Join(dir, "cache"), filepath.Join(dir, "sock")
	log := zaptest.NewLogger(t)
	open := func(masters []string, typ string) []*outbox {
		t.Helper()
		cfg.Master, cfg.MasterType = masters, typ
		_, outs, err := openLinks(cfg, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	closeAll := func(outs []*outbox) {
		for _, o := range outs {
			if err := o.spool.close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	body := func(tag string) []byte {
		b, err := protocol.Marshal(&protocol.EventBody{ID: "mv1", Tag: tag})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	outs := open([]string{"m1:4506"}, "str")
	for _, tag := range []string{"a", "b"} {
		if _, err := outs[0].pushDurable(protocol.TypeEvent, body(tag)); err != nil {
			t.Fatal(err)
		}
	}
	closeAll(outs)

	outs = open([]string{"m1:4506", "m2:4506"}, "str")
	if len(outs) != 2 {
		t.Fatalf("hot: %d outboxes, want 2", len(outs))
	}
	for i, o := range outs {
		if n := o.spool.len(); n != 2 {
			t.Errorf("hot outbox %d holds %d items, want the 2 of the single master", i, n)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.SpoolDir(), spoolFile)); !os.IsNotExist(err) {
		t.Errorf("the single master's spool is still there after the move: %v", err)
	}
	closeAll(outs)

	outs = open([]string{"m1:4506", "m2:4506"}, "failover")
	if len(outs) != 1 {
		t.Fatalf("failover: %d outboxes, want 1", len(outs))
	}
	if n := outs[0].spool.len(); n != 4 {
		t.Errorf("failover outbox holds %d items, want the 2 of each hot outbox (4)", n)
	}
	if left, _ := filepath.Glob(filepath.Join(cfg.SpoolDir(), "master-*")); len(left) != 0 {
		t.Errorf("hot spools left behind: %v", left)
	}
	closeAll(outs)
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	if got, err := resolve(ctx, "127.0.0.1:4506"); err != nil || got != "127.0.0.1:4506" {
		t.Errorf("resolve(127.0.0.1:4506) = %q, %v", got, err)
	}
	if got, err := resolve(ctx, "localhost:4506"); err != nil || (got != "127.0.0.1:4506" && got != "[::1]:4506") {
		t.Errorf("resolve(localhost:4506) = %q, %v; want a loopback address", got, err)
	}
	_, err := resolve(ctx, "no-such-master.invalid:4506")
	var de *dnsError
	if !errors.As(err, &de) {
		t.Errorf("resolve of a name that does not exist: %v, want a dnsError", err)
	}
}

func TestRetryPolicy(t *testing.T) {
	cfg := config.DefaultAgent()
	cfg.RandomReauthDelay, cfg.RetryDNS, cfg.AcceptanceWaitTime = 2, 7, 1
	p := newRetryPolicy(cfg)
	for i := 0; i < 100; i++ {
		if w := p.wait(errors.New("gone"), true); w < 100*time.Millisecond || w > 2100*time.Millisecond {
			t.Fatalf("after a lost session: wait %v, want within random_reauth_delay (2 s)", w)
		}
	}
	if w := p.wait(&dnsError{host: "x", err: errors.New("no such host")}, false); w != 7*time.Second {
		t.Errorf("after a name that does not resolve: wait %v, want retry_dns (7 s)", w)
	}
	var last time.Duration
	for i := 0; i < 10; i++ {
		last = p.wait(errors.New("refused"), false)
	}
	if last > maxBackoff+100*time.Millisecond {
		t.Errorf("backoff %v past its ceiling %v", last, maxBackoff)
	}
}

func TestMasterAddrsShuffleAndRepeats(t *testing.T) {
	cfg := config.DefaultAgent()
	cfg.Master = []string{"m1", "m2:4600", "m1:4506", "m3"}
	if got := masterAddrs(cfg); strings.Join(got, " ") != "m1:4506 m2:4600 m3:4506" {
		t.Errorf("masterAddrs = %v, want the list in order without the repeat", got)
	}
	for _, opt := range []string{"master_shuffle", "random_master"} {
		cfg.MasterShuffle, cfg.RandomMaster = opt == "master_shuffle", opt == "random_master"
		firsts := map[string]bool{}
		for i := 0; i < 200 && len(firsts) < 3; i++ {
			got := masterAddrs(cfg)
			if len(got) != 3 {
				t.Fatalf("%s: %v, want 3 masters", opt, got)
			}
			firsts[got[0]] = true
		}
		if len(firsts) != 3 {
			t.Errorf("%s: first masters seen in 200 shuffles: %v, want all 3", opt, firsts)
		}
	}
}

// TestFailoverEvents: in failover mode the agent joins the first master,
// moves to the second when the first stops, and back when it returns,
// firing Salt's __master_connected, __master_disconnected and
// __master_failback on its bus.
func TestFailoverEvents(t *testing.T) {
	// A port below the ephemeral range: the agent's dials must not take
	// it while the first master is down.
	port := 0
	for p := 20000 + rand.IntN(12000); port == 0; p = 20000 + rand.IntN(12000) {
		if pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			pc.Close()
			port = p
		}
	}
	dir1 := t.TempDir()
	sock1 := shortDir(t)
	start1 := func() (stop func() error) {
		waitFor(t, "the first master's port to be free", func() bool {
			pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
			if err == nil {
				pc.Close()
			}
			return err == nil
		})
		cfg := config.DefaultMaster()
		cfg.RootDir, cfg.Interface, cfg.Port, cfg.AutoAccept = dir1, "127.0.0.1", port, true
		cfg.PkiDir, cfg.CacheDir, cfg.SockDir, cfg.LogFile = filepath.Join(dir1, "pki"), filepath.Join(dir1, "cache"), sock1, ""
		m, err := master.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named("master1"))
		if err != nil {
			t.Fatal(err)
		}
		stop = runUntilStopped(t, "master1", m.Run)
		select {
		case <-m.Ready():
		case <-time.After(waitTimeout):
			t.Fatal("master 1 not ready")
		}
		return stop
	}
	stop1 := start1()
	m2, _, _, _ := startMasterKeyed(t, filepath.Join(dir1, "pki"))
	addr1 := fmt.Sprintf("127.0.0.1:%d", port)
	a := newTestAgent(t, "fo1", nil, func(c *config.Agent) {
		c.Master = []string{addr1, m2.Addr().String()}
		c.MasterType, c.MasterAliveInterval, c.MasterFailback, c.MasterFailbackInterval = "failover", 1, true, 1
	})
	sub := a.Subscribe("__master_*", 64)
	defer sub.Close()
	runUntilStopped(t, "agent", a.Run)
	next := func(tag, master string) {
		t.Helper()
		timer := time.NewTimer(waitTimeout)
		defer timer.Stop()
		for {
			select {
			case ev := <-sub.C():
				if ev.Tag == tag && ev.Data["master"] == master {
					return
				}
			case <-timer.C:
				t.Fatalf("no %s for %s", tag, master)
			}
		}
	}
	next("__master_connected", addr1)
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	next("__master_disconnected", addr1)
	next("__master_connected", m2.Addr().String())
	start1()
	next("__master_failback", addr1)
	next("__master_connected", addr1)
}

// TestAuthTimeout: auth_timeout (Salt's: the time each try to reach a
// master may wait for an answer, salt/config/__init__.py: 5 s; Salt's doc
// doc/ref/configuration/minion.rst) is how long a try to a master that
// never answers lasts before it is given up: about auth_timeout, and a
// larger one is waited out. Unset, it is Salt's 5 s only where giving up
// moves the agent to another master (failover), 20 s otherwise.
func TestAuthTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		masters []string
		typ     string
		want    time.Duration
	}{
		{"one master", []string{"m1"}, "str", 20 * time.Second},
		{"hot masters", []string{"m1", "m2"}, "str", 20 * time.Second},
		{"failover, one master", []string{"m1"}, "failover", 20 * time.Second},
		{"failover", []string{"m1", "m2"}, "failover", 5 * time.Second},
	} {
		a := newTestAgent(t, "auto", nil, func(c *config.Agent) { c.Master, c.MasterType = tc.masters, tc.typ })
		if got := a.quicConfig().HandshakeIdleTimeout; got != tc.want {
			t.Errorf("%s, auth_timeout unset: QUIC handshake idle timeout %v, want %v", tc.name, got, tc.want)
		}
		for _, o := range a.outs {
			o.spool.close()
		}
	}

	silent, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for _, tc := range []struct {
		secs     int
		min, max time.Duration
	}{
		{1, 900 * time.Millisecond, 4 * time.Second},
		{7, 6900 * time.Millisecond, 12 * time.Second},
	} {
		a := newTestAgent(t, fmt.Sprintf("auth%d", tc.secs), nil, func(c *config.Agent) {
			c.Master = []string{silent.LocalAddr().String()}
			c.AuthTimeout = tc.secs
		})
		if got := a.quicConfig().HandshakeIdleTimeout; got != time.Duration(tc.secs)*time.Second {
			t.Errorf("auth_timeout %d: QUIC handshake idle timeout %v", tc.secs, got)
		}
		start := time.Now()
		_, err := a.dial(context.Background(), a.links[0], 0)
		took := time.Since(start)
		if err == nil || took < tc.min || took > tc.max {
			t.Errorf("auth_timeout %d: a silent master's try ended after %v with %v; want an error after %v to %v", tc.secs, took, err, tc.min, tc.max)
		}
		for _, o := range a.outs {
			o.spool.close()
		}
	}
}
