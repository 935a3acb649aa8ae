package relay

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/sshtest"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// proxyEntries starts an SSH server, an ONVIF camera, a REST device and a
// REST device that hangs, on loopback, and returns the relay: proxy:
// entries for them. The devices stop with the test.
func proxyEntries(t *testing.T) []config.Proxy {
	t.Helper()
	srv, err := sshtest.Start("127.0.0.1:0", "admin", "sshpw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cam := proxytest.NewCamera("admin", "campw")
	t.Cleanup(cam.Close)
	dev := proxytest.NewRESTDevice("u", "p", nil)
	t.Cleanup(dev.Close)
	hang := make(chan struct{})
	slow := proxytest.NewRESTDevice("u", "p", hang)
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hang) }) // before slow.Close: it waits for its handlers
	host, port, _ := strings.Cut(srv.Addr, ":")
	var p int
	fmt.Sscan(port, &p)
	return []config.Proxy{
		{ID: "cam-ssh", ProxyType: "ssh", Host: host, Port: p, Username: "admin", Password: "sshpw", AcceptNewHostKey: true,
			KnownHosts: t.TempDir() + "/known_hosts", Timeout: 10},
		{ID: "cam-onvif", ProxyType: "onvif", URL: cam.URL(), Username: "admin", Password: "campw", Timeout: 10,
			Grains: map[string]any{"site": "depot"}},
		{ID: "gw-http", ProxyType: "http", URL: dev.URL, Username: "u", Password: "p", HealthPath: "/health", Timeout: 10},
		{ID: "gw-hang", ProxyType: "http", URL: slow.URL, HealthPath: "/health", Timeout: 2},
	}
}

// TestProxyMinions: a relay's proxy minions (ssh, onvif, http) come to the
// master as pending keys marked proxied by the relay; once accepted they
// answer jobs like agents, targeted by id and by grain, and a device that
// hangs costs its own return its timeout, nothing else's.
func TestProxyMinions(t *testing.T) {
	tm := startMaster(t, false)
	entries := proxyEntries(t)
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = entries }, nil)
	waitFor(t, "r1's key pending", func() bool {
		l, _ := tm.wheel(t, "key.list", "pre").(map[string]any)
		pre, _ := l[keys.DirPending].([]any)
		return len(pre) == 1
	})
	tm.wheel(t, "key.accept", "r1")

	waitFor(t, "the proxy minions' keys pending", func() bool {
		l, _ := tm.wheel(t, "key.list", "all").(map[string]any)
		pre, _ := l[keys.DirPending].([]any)
		return len(pre) == 4
	})
	l := tm.wheel(t, "key.list", "all").(map[string]any)
	want := map[string]any{"cam-ssh": "r1", "cam-onvif": "r1", "gw-http": "r1", "gw-hang": "r1"}
	if d := cmp.Diff(want, l[keys.ProxiedKey]); d != "" {
		t.Fatalf("key.list proxied (-want +got):\n%s", d)
	}
	tm.wheel(t, "key.accept", "*")
	waitFor(t, "the proxy minions' sessions", func() bool { _, up := tr.proxyStats(); return up == 4 })

	start := time.Now()
	got, rets, missing := tm.publish(t, "*", "test.ping", 20)
	if d := cmp.Diff([]string{"cam-onvif", "cam-ssh", "gw-hang", "gw-http", "r1"}, got); d != "" || len(missing) != 0 {
		t.Fatalf("test.ping returned (-want +got):\n%s\nmissing %v", d, missing)
	}
	for id, want := range map[string]any{"cam-onvif": true, "cam-ssh": true, "gw-http": true, "r1": true, "gw-hang": false} {
		if rets[id] != want {
			t.Errorf("test.ping of %s: got %v, want %v", id, rets[id], want)
		}
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("test.ping took %s", el)
	}

	got, rets, _ = tm.publish(t, "G@proxytype:onvif", "onvif.device_info", 10)
	if d := cmp.Diff([]string{"cam-onvif"}, got); d != "" {
		t.Fatalf("onvif.device_info by grain returned (-want +got):\n%s", d)
	}
	if m, _ := rets["cam-onvif"].(map[string]any); m["Model"] != "CAM-7" {
		t.Errorf("onvif.device_info: got %v", rets["cam-onvif"])
	}
	got, rets, _ = tm.publish(t, "G@site:depot", "test.echo", 10, "hi")
	if d := cmp.Diff([]string{"cam-onvif"}, got); d != "" || rets["cam-onvif"] != "hi" {
		t.Errorf("test.echo by a static grain: %v %v", got, rets)
	}
	_, rets, _ = tm.publish(t, "cam-ssh", "cmd.run", 10, "uname -s")
	if rets["cam-ssh"] != "Linux" {
		t.Errorf("cmd.run uname -s on cam-ssh: got %v", rets["cam-ssh"])
	}

	// The hanging device does not hold the others: they answer while
	// its calls wait for their timeouts.
	start = time.Now()
	_, rets, _ = tm.publish(t, "L@gw-http,cam-onvif", "test.ping", 10)
	if rets["gw-http"] != true || rets["cam-onvif"] != true {
		t.Errorf("test.ping beside a hanging device: %v", rets)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("two healthy proxy minions took %s", el)
	}

	// A deleted key ends the session; the relay comes back pending.
	tm.wheel(t, "key.delete", "gw-http")
	waitFor(t, "gw-http pending again", func() bool {
		l, _ := tm.wheel(t, "key.list", "pre").(map[string]any)
		pre, _ := l[keys.DirPending].([]any)
		return len(pre) == 1 && pre[0] == "gw-http"
	})
}

// TestProxyBoundToRelay: a proxy minion's id is bound to the relay that
// first presented it: another relay's proxy minion of the same id is
// refused, and so is a device agent under that id.
func TestProxyBoundToRelay(t *testing.T) {
	tm := startMaster(t, true)
	dev := proxytest.NewRESTDevice("u", "p", nil)
	defer dev.Close()
	e := []config.Proxy{{ID: "gw", ProxyType: "http", URL: dev.URL, HealthPath: "/health", Timeout: 5}}
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = e }, nil)
	waitFor(t, "gw up behind r1", func() bool { _, up := tr.proxyStats(); return up == 1 })

	tr2 := startRelay(t, tm, "r2", func(r *config.Relay) { r.Proxies = e }, nil)
	waitFor(t, "the master to refuse r2's gw", func() bool { return tr2.proxyRefused.Load() > 0 })
	if _, up := tr2.proxyStats(); up != 0 {
		t.Errorf("r2's gw session is up")
	}
	l := tm.wheel(t, "key.list", "all").(map[string]any)
	if d := cmp.Diff(map[string]any{"gw": "r1"}, l[keys.ProxiedKey]); d != "" {
		t.Errorf("proxied (-want +got):\n%s", d)
	}
	_, rets, _ := tm.publish(t, "gw", "test.ping", 10)
	if rets["gw"] != true {
		t.Errorf("gw test.ping: %v", rets)
	}
}

// TestProxyReturnAcrossLinkCut: a proxy minion's return made while the
// relay's link to the master is down (here: the master restarts, as in
// TestRelayMasterRestart for a device) waits in the relay's spool and
// reaches the master once the link is back, and is announced once; also
// when the relay itself restarts meanwhile (its spool and the proxy
// minion's Hello kept on disk: resumeProxyOrphan).
func TestProxyReturnAcrossLinkCut(t *testing.T) {
	for _, restartRelay := range []bool{false, true} {
		t.Run(fmt.Sprintf("relay_restart=%v", restartRelay), func(t *testing.T) {
			testProxyReturnAcrossLinkCut(t, restartRelay)
		})
	}
}

func testProxyReturnAcrossLinkCut(t *testing.T, restartRelay bool) {
	tm := startMaster(t, true)
	srv, err := sshtest.Start("127.0.0.1:0", "admin", "sshpw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	host, port, _ := strings.Cut(srv.Addr, ":")
	var p int
	fmt.Sscan(port, &p)
	e := []config.Proxy{{ID: "cam-ssh", ProxyType: "ssh", Host: host, Port: p, Username: "admin", Password: "sshpw",
		AcceptNewHostKey: true, KnownHosts: t.TempDir() + "/known_hosts", Timeout: 60}}
	forwarded := make(chan struct{}, 16)
	tamper := func(typ protocol.Type, wire []byte) []byte {
		if typ == protocol.TypeJob {
			forwarded <- struct{}{}
		}
		return wire // observed, not altered
	}
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = e }, tamper)
	waitFor(t, "cam-ssh up", func() bool { _, up := tr.proxyStats(); return up == 1 })

	// The command waits for a file the test makes once the master is
	// down: its return is made while the link is cut.
	gate := filepath.Join(t.TempDir(), "gate")
	jid := asyncJob(t, tm, "cam-ssh", "cmd.run", "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo done")
	select {
	case <-forwarded:
	case <-time.After(waitTimeout):
		t.Fatal("the relay never got the job")
	}
	waitFor(t, "the job to run on cam-ssh", func() bool { return tr.proxies[0].running.Load() == 1 })
	if err := tm.run.stop(); err != nil {
		t.Fatalf("master stop: %v", err)
	}
	waitFor(t, "the relay to see its link go", func() bool { return tr.link.Load() == nil })
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cam-ssh's return to be made", func() bool { return tr.proxyReturns.Load() == 1 })
	if st := tr.Stats(); st.SpoolItems != 1 {
		t.Errorf("relay spool holds %d items while the link is down, want 1", st.SpoolItems)
	}
	var addr string
	if restartRelay {
		addr = tr.Addr().String()
		if err := tr.run.stop(); err != nil {
			t.Fatalf("relay stop: %v", err)
		}
	}
	tm.mu.Lock()
	tm.seen = nil
	tm.mu.Unlock()
	tm.boot(t)
	if restartRelay {
		tr.boot(t, addr, tamper)
	}

	ret := tm.waitEvent(t, "salt/job/"+jid+"/ret/cam-ssh", nil)
	if ret["return"] != "done" {
		t.Errorf("cam-ssh's return after the link came back: %v", ret)
	}
	// Exactly once: a later job's return comes after any copy of the
	// first on the proxy minion's session.
	waitFor(t, "cam-ssh up again", func() bool { _, up := tr.proxyStats(); return up == 1 })
	_, rets, _ := tm.publish(t, "cam-ssh", "test.ping", 20)
	if rets["cam-ssh"] != true {
		t.Errorf("test.ping after the cut: %v", rets)
	}
	waitFor(t, "the relay's spool to empty", func() bool { return tr.Stats().SpoolItems == 0 })
	// Read the bus up to that return's event.
	tm.waitEvent(t, "salt/job/*/ret/cam-ssh", func(d map[string]any) bool { return d["fun"] == "test.ping" })
	tm.mu.Lock()
	n := 0
	for _, ev := range tm.seen {
		if ev.Tag == "salt/job/"+jid+"/ret/cam-ssh" {
			n++
		}
	}
	tm.mu.Unlock()
	if n != 1 {
		t.Errorf("the return was announced %d times, want once", n)
	}
	if st := tr.Stats(); st.SpoolDropped != 0 {
		t.Errorf("relay dropped %d items", st.SpoolDropped)
	}
}

// TestProxyReturnAckLost: a proxy minion's return that reached the master
// but whose ack the relay had not read when the link dropped is sent
// again on the next link (the relay cannot tell), and the master
// announces it once: the session resumes under the same MAC key, and
// the master's replay rule and job cache (one return per jid and id,
// master/jobcache SaveReturnNew) take the copy as a replay.
func TestProxyReturnAckLost(t *testing.T) {
	old := proxySweep
	proxySweep = time.Hour // the relay reads no ack but on a new link
	t.Cleanup(func() { proxySweep = old })
	tm := startMaster(t, true)
	tr := startGWRelay(t, tm)
	waitFor(t, "gw up", func() bool { _, up := tr.proxyStats(); return up == 1 })

	_, rets, _ := tm.publish(t, "gw", "test.ping", 10)
	if rets["gw"] != true {
		t.Fatalf("test.ping: %v", rets)
	}
	first := tm.waitEvent(t, "salt/job/*/ret/gw", nil)
	if st := tr.Stats(); st.SpoolItems != 1 {
		t.Fatalf("relay spool holds %d items, want the unacknowledged return", st.SpoolItems)
	}
	// What the bus carries from here on.
	tm.mu.Lock()
	tm.seen = nil
	tm.mu.Unlock()
	ups := tr.linkUps.Load()
	tr.link.Load().conn.CloseWithError(0, "test: link cut")
	waitFor(t, "the link back", func() bool { return tr.linkUps.Load() > ups && tr.link.Load() != nil })
	tm.waitEvent(t, "salt/minion/gw/start", nil) // its session on the new link
	_, rets, _ = tm.publish(t, "gw", "test.echo", 10, "after")
	if rets["gw"] != "after" {
		t.Fatalf("test.echo after the cut: %v", rets)
	}
	tm.waitEvent(t, "salt/job/*/ret/gw", func(d map[string]any) bool { return d["fun"] == "test.echo" })
	tm.mu.Lock()
	n := 0
	for _, ev := range tm.seen {
		if ev.Tag == "salt/job/"+fmt.Sprint(first["jid"])+"/ret/gw" {
			n++
		}
	}
	tm.mu.Unlock()
	if n != 0 {
		t.Errorf("the first return was announced again %d times after the link came back, want none", n)
	}
}

// TestProxyReturnTooLarge: a device that answers more than a return may
// carry (here: a compound job of five commands of 1 MiB of output each,
// each within what one call keeps) gets its job answered with a failure
// saying so, as an agent does (agent/session.go queueReturn); the
// relay's link and the proxy minion's
// session go on.
func TestProxyReturnTooLarge(t *testing.T) {
	tm := startMaster(t, true)
	srv, err := sshtest.Start("127.0.0.1:0", "admin", "sshpw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	host, port, _ := strings.Cut(srv.Addr, ":")
	var p int
	fmt.Sscan(port, &p)
	e := []config.Proxy{{ID: "cam-ssh", ProxyType: "ssh", Host: host, Port: p, Username: "admin", Password: "sshpw",
		AcceptNewHostKey: true, KnownHosts: t.TempDir() + "/known_hosts", Timeout: 30}}
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = e }, nil)
	waitFor(t, "cam-ssh up", func() bool { _, up := tr.proxyStats(); return up == 1 })
	ups := tr.linkUps.Load()

	// 1 MiB on stdout and 1 MiB on stderr, twice, and a file of 1 MiB.
	const big = "head -c 1048576 /dev/zero | tr '\\000' a"
	file := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(file, bytes.Repeat([]byte("b"), 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout+30*time.Second)
	defer cancel()
	funs := []string{"cmd.run", "cmd.run_all", "file.read"}
	args := [][]any{{big + "; " + big + " >&2"}, {big + "; " + big + " >&2"}, {file}}
	c, err := api.Dial(ctx, tm.sock, &api.Request{Op: api.OpPublish, Tgt: "cam-ssh", Funs: funs, FunArgs: args, Timeout: 30, User: "tester"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	var got any
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
		if r.Kind == api.KindReturn {
			got = r.Data["return"]
		}
		if r.Done {
			break
		}
	}
	if s, _ := got.(string); !strings.HasPrefix(s, "return too large: ") {
		t.Errorf("compound job of 5 MiB of output: got %.200v, want a return too large", got)
	}
	_, rets, _ := tm.publish(t, "cam-ssh", "test.ping", 10)
	if rets["cam-ssh"] != true {
		t.Errorf("test.ping after: %v", rets)
	}
	if n := tr.linkUps.Load(); n != ups {
		t.Errorf("the link came up %d more times", n-ups)
	}
}

// TestProxyFirstJobAfterRestart: a relay restarted while the master had
// not acknowledged a proxy minion's return sends that return in a session
// of the previous run (resumeProxyOrphan), then opens the proxy minion's
// session of this run; the first job after that is answered.
func TestProxyFirstJobAfterRestart(t *testing.T) {
	old := proxySweep
	t.Cleanup(func() { proxySweep = old })
	proxySweep = time.Hour // the relay reads no ack: the return still waits when it stops
	tm := startMaster(t, true)
	tr := startGWRelay(t, tm)
	waitFor(t, "gw up", func() bool { _, up := tr.proxyStats(); return up == 1 })
	if _, rets, _ := tm.publish(t, "gw", "test.ping", 10); rets["gw"] != true {
		t.Fatalf("test.ping: %v", rets)
	}
	if st := tr.Stats(); st.SpoolItems != 1 {
		t.Fatalf("relay spool holds %d items, want the unacknowledged return", st.SpoolItems)
	}
	addr := tr.Addr().String()
	if err := tr.run.stop(); err != nil {
		t.Fatalf("relay stop: %v", err)
	}
	proxySweep = old
	tr.boot(t, addr, nil)
	waitFor(t, "gw up after the relay's restart", func() bool { _, up := tr.proxyStats(); return up == 1 })
	_, rets, missing := tm.publish(t, "gw", "test.echo", 10, "first")
	if rets["gw"] != "first" {
		t.Fatalf("the first job after the relay's restart: got %v, missing %v", rets, missing)
	}
	waitFor(t, "the relay's spool to empty", func() bool { return tr.Stats().SpoolItems == 0 })
}

// TestProxyJobBeforeStatusRead: the master attaches a proxy minion's
// session when its key is accepted and may publish to it at once, but the
// relay reads the accepted status from the proxy minion's stream only in
// its sweep or on a job (up to 2 s later, or after the job if the status
// comes behind it): the job fanned out meanwhile runs once the status is
// read. Before replayProxy it was never run (seen in CI: TestProxyMinions'
// first ping, a proxy minion "did not return").
func TestProxyJobBeforeStatusRead(t *testing.T) {
	tm := startMaster(t, false)
	var hold atomic.Bool
	tr := startGWRelay(t, tm, func(tr *testRelay) {
		tr.holdProxyStatus = func(id string) bool { return id == "gw" && hold.Load() }
	})
	tm.waitEvent(t, "salt/auth", idIs("r1"))
	tm.wheel(t, "key.accept", "r1")
	tm.waitEvent(t, "salt/auth", func(d map[string]any) bool { return d["id"] == "gw" && d["act"] == "pend" })
	waitFor(t, "gw pending at the relay", func() bool {
		for _, p := range tr.proxyList() {
			p.mu.Lock()
			st := p.state
			p.mu.Unlock()
			if st == proxyPending {
				return true
			}
		}
		return false
	})
	hold.Store(true)
	tm.wheel(t, "key.accept", "gw")
	tm.waitEvent(t, "salt/minion/gw/start", nil)
	type answer struct {
		rets    map[string]any
		missing []string
	}
	c := make(chan answer, 1)
	go func() {
		_, rets, missing := tm.publish(t, "gw", "test.echo", 10, "first")
		c <- answer{rets, missing}
	}()
	time.Sleep(700 * time.Millisecond) // the job reaches the relay, which has not read gw's status
	hold.Store(false)
	a := <-c
	if a.rets["gw"] != "first" {
		t.Fatalf("a job published as gw's key was accepted: got %v, missing %v", a.rets, a.missing)
	}
	// Run once: a second publish's return is its own, and the echo is not
	// run again by a later sweep's replay.
	if _, rets, _ := tm.publish(t, "gw", "test.echo", 10, "second"); rets["gw"] != "second" {
		t.Fatalf("second job: got %v", rets)
	}
	if n := tr.proxyReturns.Load(); n != 2 {
		t.Errorf("the relay made %d proxy returns, want 2 (each job run once)", n)
	}
}

// startGWRelay starts relay r1 with one proxy minion, "gw": a REST device
// (credentials u/p, a 10 s call timeout) that lives as long as the test.
func startGWRelay(t *testing.T, tm *testMaster, opts ...func(*testRelay)) *testRelay {
	t.Helper()
	dev := proxytest.NewRESTDevice("u", "p", nil)
	t.Cleanup(dev.Close)
	e := []config.Proxy{{ID: "gw", ProxyType: "http", URL: dev.URL, HealthPath: "/health", Timeout: 10}}
	return startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = e }, nil, opts...)
}
