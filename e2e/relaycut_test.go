package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/udphop"
)

// masterAndRelay starts the cluster's master and an accepted relay id,
// and returns the relay's port for devices.
func (c *cluster) masterAndRelay(id string) int {
	c.t.Helper()
	c.startMaster()
	port := freeUDPPort(c.t)
	c.startAgent(id, relayConf(port))
	c.acceptAll(id)
	return port
}

// relayAllow is the master's relay_allow of these tests: their relays.
const relayAllow = "relay_allow: [r1, r2]\n"

// relayConf is the relay: section of a relay listening on port.
func relayConf(port int) string {
	return fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n  heartbeat: 1\n", port)
}

// heartbeat is a relay's halite/relay/<id>/heartbeat event, as far as the
// tests read it.
type heartbeat struct {
	Devices    int  `json:"devices"`
	Upstream   bool `json:"upstream"`
	SpoolItems int  `json:"spool_items"`
	SpoolBytes int  `json:"spool_bytes"`
}

// TestRelayUpstreamCut: the WAN between a relay and its master (here a
// udpHop) goes silent for longer than QUIC's idle timeout while a job runs
// on the devices behind it and they fire events. The relay holds what they
// send (its heartbeats, which wait in its own agent's spool, say so), its
// link drops and comes back, and then every return arrives and every event
// arrives once, in order, including those sent just before the cut, which
// the relay sends again. A job published during the cut does not reach
// the devices (halite says they did not return, as Salt words it); one
// published after works.
func TestRelayUpstreamCut(t *testing.T) {
	c := newCluster(t, relayAllow)
	c.startMaster()
	hop := udphop.Start(t, fmt.Sprintf("127.0.0.1:%d", c.port))
	upstreamCut(t, c, "", fmt.Sprintf("127.0.0.1:%d", hop.Port()), func(cut bool) {
		if !cut && hop.Dropped() == 0 {
			t.Error("the hop dropped nothing during the cut")
		}
		hop.Cut(cut)
	})
}

// TestRelayUpstreamCutNetns is TestRelayUpstreamCut with the kernel
// cutting: the master in a network namespace of its own, the relay and
// its devices in another, joined by a veth pair that is set down. It
// needs root: it is skipped otherwise, and fails as root where network
// namespaces cannot be made.
func TestRelayUpstreamCutNetns(t *testing.T) {
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	nsM, nsR := "hlcM"+tag, "hlcR"+tag
	vM, vR := "hcm"+tag, "hcr"+tag
	for _, ns := range []string{nsM, nsR} {
		if ok, why := netns(t, ns); !ok {
			if os.Geteuid() == 0 {
				t.Fatalf("running as root, but network namespaces are refused (%s)", why)
			}
			t.Skipf("network namespaces are refused (%s); this test needs root", why)
		}
	}
	ipCmd(t, "link", "add", vM, "netns", nsM, "type", "veth", "peer", "name", vR, "netns", nsR)
	ipCmd(t, "-n", nsM, "addr", "add", "10.232.0.1/24", "dev", vM)
	ipCmd(t, "-n", nsR, "addr", "add", "10.232.0.2/24", "dev", vR)
	for _, a := range [][]string{{nsM, vM}, {nsM, "lo"}, {nsR, vR}, {nsR, "lo"}} {
		ipCmd(t, "-n", a[0], "link", "set", a[1], "up")
	}
	c := newCluster(t, relayAllow)
	c.iface, c.netns = "10.232.0.1", nsM
	c.startMaster()
	upstreamCut(t, c, nsR, fmt.Sprintf("10.232.0.1:%d", c.port), func(cut bool) {
		state := "up"
		if cut {
			state = "down"
		}
		ipCmd(t, "-n", nsM, "link", "set", vM, state)
	})
}

// startAt starts an agent whose master: is addr (a master, a relay, a
// hop), in the network namespace ns ("": the test's).
func (c *cluster) startAt(ns, id, addr, extra string) *proc {
	c.t.Helper()
	dir := c.agentDir(id)
	os.MkdirAll(dir, 0o755)
	conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: %s\nacceptance_wait_time: 1\nlog_file: ''\n%s",
		id, filepath.Join(c.root, id), addr, extra)
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
	var p *proc
	if ns == "" {
		p = c.start("halite-agent", "-c", dir, "-l", "info")
	} else {
		p = c.startRaw("/usr/sbin/ip", "netns", "exec", ns, filepath.Join(binDir, "halite-agent"), "-c", dir, "-l", "info")
	}
	c.agents[id] = p
	return p
}

// upstreamCut runs the scenario of TestRelayUpstreamCut on c's running
// master: a relay r1 whose master: is masterAddr and three devices behind
// it, all in the network namespace ns; cut(true) cuts the path between r1
// and the master, cut(false) restores it.
func upstreamCut(t *testing.T, c *cluster, ns, masterAddr string, cut func(bool)) {
	t.Helper()
	rPort := freeUDPPort(t)
	relay := c.startAt(ns, "r1", masterAddr, relayConf(rPort))
	c.acceptAll("r1")
	devs := []string{"d1", "d2", "d3"}
	for _, id := range devs {
		c.startAt(ns, id, fmt.Sprintf("127.0.0.1:%d", rPort), "")
	}
	c.acceptAll(append([]string{"r1"}, devs...)...)
	lines := c.eventStream(t)

	jid := asyncJob(t, c, "d*", "test.sleep", "3")
	waitRunning(t, c, jid, 3)

	// The devices fire an event just before the cut (it reaches the
	// master; its ack may not reach the relay, which then sends it again
	// after the cut) and two while the upstream is cut; their returns come
	// during the cut too (test.sleep 3).
	const perDevice = 3
	fire := func(n int) {
		t.Helper()
		for _, id := range devs {
			if r := runCmd(t, "halite-call", "-c", c.agentDir(id), "event.send", "e2e/cut/"+id, fmt.Sprintf(`{"n": %d}`, n)); r.code != 0 {
				t.Fatalf("halite-call event.send on %s (n=%d): exit %d, %s", id, n, r.code, r.stderr)
			}
		}
	}
	fire(1)
	ended, up := strings.Count(relay.output(), "upstream link ended"), strings.Count(relay.output(), "upstream link up")
	cut(true)
	cutAt := time.Now()
	for n := 2; n <= perDevice; n++ {
		fire(n)
	}
	// QUIC's idle timeout (15 s) ends the link on both sides.
	waitFor(t, 30*time.Second, "r1 to see its upstream link end", func() bool {
		return strings.Count(relay.output(), "upstream link ended") > ended
	})
	waitFor(t, 30*time.Second, "the master to see the devices go", func() bool {
		r := c.cli("halite-run", "manage.down", "--out", "json")
		var down []string
		json.Unmarshal([]byte(r.stdout), &down)
		return strings.Join(down, ",") == "d1,d2,d3,r1"
	})
	// A job published now does not reach the devices.
	r := c.cli("halite", "--show-jid", "-t", "2", "d*", "test.echo", "during-cut", "--out", "json")
	cutJID, _, _ := strings.Cut(strings.TrimPrefix(r.stdout, "jid: "), "\n")
	for _, id := range devs {
		if want := fmt.Sprintf(`"%s": "Minion did not return. [Not connected]"`, id); !strings.Contains(r.stdout, want) || r.code == 0 {
			t.Errorf("halite d* during the cut: exit %d, stdout %q; want %s and a failure", r.code, r.stdout, want)
		}
	}
	cut(false)
	t.Logf("upstream cut for %v", time.Since(cutAt).Round(time.Millisecond))

	waitFor(t, 60*time.Second, "the returns of "+jid+" after the cut", func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return m["d1"] == true && m["d2"] == true && m["d3"] == true
	})

	// Every event, once, in order; the heartbeats made during the cut
	// (delivered now, from the relay agent's spool) show the relay held
	// the devices' items, and a later one that it holds none. Waiting for
	// that one also leaves time for a duplicate to show.
	got := map[string][]int{}
	var during, after bool
	var beats []heartbeat
	deadline := time.After(60 * time.Second)
	for total := 0; total < perDevice*len(devs) || !after; {
		var l string
		select {
		case l = <-lines:
		case <-deadline:
			t.Fatalf("after the cut: events %v (want %d per device), a heartbeat of the cut with items held "+
				"(upstream false, spool_items > 0) %v, then one with the upstream back and nothing held %v; heartbeats %+v",
				got, perDevice, during, after, beats)
		}
		tag, js, _ := strings.Cut(l, "\t")
		switch {
		case strings.HasPrefix(tag, "e2e/cut/"):
			var ev struct {
				ID   string
				Data struct{ N int }
			}
			if err := json.Unmarshal([]byte(js), &ev); err != nil {
				t.Fatalf("event %s: %v", tag, err)
			}
			got[ev.ID] = append(got[ev.ID], ev.Data.N)
			total++
		case tag == "halite/relay/r1/heartbeat":
			var ev struct{ Data heartbeat }
			if err := json.Unmarshal([]byte(js), &ev); err != nil {
				t.Fatalf("event %s: %v", tag, err)
			}
			hb := ev.Data
			beats = append(beats, hb)
			if !hb.Upstream && hb.SpoolItems > 0 && hb.SpoolBytes > 0 && hb.Devices == 3 {
				during = true
			}
			// The relay's heartbeats come in the order they were made
			// (its agent's spool), but not in order with the devices'
			// events (another connection): one made just before the cut
			// may come after them. One after a heartbeat of the cut was
			// made after it.
			if during && hb.Upstream && hb.SpoolItems == 0 && hb.SpoolBytes == 0 && hb.Devices == 3 && total >= perDevice*len(devs) {
				after = true
			}
		}
	}
	for _, id := range devs {
		if g := fmt.Sprint(got[id]); g != "[1 2 3]" {
			t.Errorf("events of %s after the cut: n = %s, want [1 2 3] (each once, in order)", id, g)
		}
	}
	if n := strings.Count(relay.output(), "upstream link up"); n <= up {
		t.Errorf("r1 logged its upstream link up %d times, %d before the cut: want it back after the cut", n, up)
	}

	// The job of the cut never ran; a new one works.
	m, _ := c.jsonOut("halite", "d*", "test.ping")
	for _, id := range devs {
		if m[id] != true {
			t.Errorf("test.ping after the cut: %s returned %v, want true", id, m[id])
		}
	}
	if m, r := c.jsonOut("halite-run", "jobs.lookup_jid", cutJID); len(m) != 0 {
		t.Errorf("jobs.lookup_jid %s (the job of the cut): got %v, want no returns\n%s", cutJID, m, r.stderr)
	}
}

// startBehindAs starts a second agent process, configured under name,
// that says it is id: a device behind the relay on relayPort with its own
// fresh key.
func (c *cluster) startBehindAs(name, id string, relayPort int) *proc {
	c.t.Helper()
	dir := c.agentDir(name)
	os.MkdirAll(dir, 0o755)
	conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1:%d\nacceptance_wait_time: 1\nlog_file: ''\n",
		id, filepath.Join(c.root, name), relayPort)
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	c.agents[name] = p
	return p
}

// keyList is halite-key -L --out json.
func (c *cluster) keyList() map[string]any {
	c.t.Helper()
	m, _ := c.jsonOut("halite-key", "-L")
	return m
}

// listed reports whether id is in the key list's state (minions, ...).
func listed(keys map[string]any, state, id string) bool {
	l, _ := keys[state].([]any)
	for _, v := range l {
		if v == id {
			return true
		}
	}
	return false
}

// TestRelayImpostor: a second agent process behind the relay says it is
// an accepted device, with another key. While the device is connected the
// relay refuses it (halite/relay/r1/device/d1/refused) and the master
// never hears of it; with the device away, its Hello reaches the master,
// which denies the key as Salt does (minions_denied) and keeps the
// accepted one. The real device works throughout, and comes back.
func TestRelayImpostor(t *testing.T) {
	c := newCluster(t, relayAllow)
	rPort := c.masterAndRelay("r1")
	c.startBehind("d1", rPort, "")
	c.acceptAll("r1", "d1")
	fp, _ := c.jsonOut("halite-key", "-f", "d1")
	acc, _ := fp["minions"].(map[string]any)
	finger, _ := acc["d1"].(string)
	if finger == "" {
		t.Fatalf("halite-key -f d1: no accepted fingerprint: %v", fp)
	}
	lines := c.eventStream(t)

	imp := c.startBehindAs("d1-impostor", "d1", rPort)
	_, ev := nextEvent(t, lines, "halite/relay/r1/device/d1/refused")
	data, _ := ev["data"].(map[string]any)
	if data["finger"] == finger || data["finger"] == nil {
		t.Errorf("refused event: finger %v, want the impostor's (not %s)", data["finger"], finger)
	}
	if m, r := c.jsonOut("halite", "d1", "test.ping"); m["d1"] != true {
		t.Errorf("test.ping d1 with an impostor knocking: %v\n%s", m, r.stderr)
	}
	if keys := c.keyList(); listed(keys, "minions_denied", "d1") || listed(keys, "minions_pre", "d1") {
		t.Errorf("the impostor refused by the relay reached the master's key store: %v", keys)
	}

	// The device goes away: the impostor's Hello reaches the master, whose
	// key store denies it and keeps the accepted key.
	c.stop(c.agents["d1"])
	waitFor(t, 30*time.Second, "the master to deny the impostor's key", func() bool {
		return listed(c.keyList(), "minions_denied", "d1")
	})
	fp, _ = c.jsonOut("halite-key", "-f", "d1")
	if acc, _ := fp["minions"].(map[string]any); acc["d1"] != finger {
		t.Errorf("accepted key of d1 after the impostor: %v, want %s", acc["d1"], finger)
	}
	if den, _ := fp["minions_denied"].(map[string]any); den["d1"] == finger || den["d1"] == nil {
		t.Errorf("denied key of d1: %v, want the impostor's", den["d1"])
	}
	// The real device comes back while the impostor keeps knocking.
	c.startBehind("d1", rPort, "")
	c.waitUp("d1")
	if m, r := c.jsonOut("halite", "d1", "test.ping"); m["d1"] != true {
		t.Errorf("test.ping d1 back, the impostor knocking: %v\n%s", m, r.stderr)
	}
	if strings.Contains(imp.output(), "agent connected") {
		t.Errorf("the impostor says it connected:\n%s", imp.output())
	}
}

// TestRelayKeyLifecycle: acceptance, deletion and rejection of a device's
// key reach the device through its relay as they reach a direct agent
// (x1, beside it): accepted, it runs jobs; deleted, the master drops its
// session and it comes back pending (through the relay, as halite-key
// shows); rejected, it stays out; deleted and accepted again, it works.
func TestRelayKeyLifecycle(t *testing.T) {
	c := newCluster(t, relayAllow)
	rPort := c.masterAndRelay("r1")
	c.startBehind("d1", rPort, "")
	c.startAgent("x1", "")
	pendingVia := func() bool {
		keys := c.keyList()
		relays, _ := keys["relays"].(map[string]any)
		return listed(keys, "minions_pre", "d1") && relays["d1"] == "r1"
	}
	bothPending := func() bool {
		keys := c.keyList()
		relays, _ := keys["relays"].(map[string]any)
		return listed(keys, "minions_pre", "d1") && relays["d1"] == "r1" &&
			listed(keys, "minions_pre", "x1") && len(relays) == 1
	}
	waitFor(t, 30*time.Second, "d1 pending via r1, x1 pending", bothPending)
	if r := c.cli("halite-key", "-a", "d1,x1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -a d1,x1: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	c.waitUp("d1", "x1")
	if m, r := c.jsonOut("halite", "-L", "d1,x1", "test.ping"); m["d1"] != true || m["x1"] != true {
		t.Fatalf("test.ping d1,x1 accepted: %v\n%s", m, r.stderr)
	}

	// Deleted: dropped, and back as pending (d1 through the relay), both.
	if r := c.cli("halite-key", "-d", "d1,x1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -d d1,x1: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 30*time.Second, "d1 (via r1) and x1 pending again after their keys were deleted", bothPending)
	if r := c.cli("halite-run", "manage.up", "--out", "json"); strings.Contains(r.stdout, `"d1"`) || strings.Contains(r.stdout, `"x1"`) {
		t.Errorf("manage.up after the keys of d1 and x1 were deleted: %s", r.stdout)
	}

	// Rejected: it stays out.
	if r := c.cli("halite-key", "-r", "d1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -r d1: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	if keys := c.keyList(); !listed(keys, "minions_rejected", "d1") || keys["relays"] != nil {
		t.Errorf("after halite-key -r d1: %v, want d1 rejected and no relays", keys)
	}
	if r := c.cli("halite-run", "manage.up", "--out", "json"); strings.Contains(r.stdout, `"d1"`) {
		t.Errorf("manage.up after d1's key was rejected: %s", r.stdout)
	}

	// Deleted and accepted again: it works.
	if r := c.cli("halite-key", "-d", "d1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -d d1: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 30*time.Second, "d1 pending via r1 after its rejected key was deleted", pendingVia)
	if r := c.cli("halite-key", "-a", "d1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -a d1: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	c.waitUp("d1")
	if m, r := c.jsonOut("halite", "d1", "test.ping"); m["d1"] != true {
		t.Errorf("test.ping d1 accepted again: %v\n%s", m, r.stderr)
	}
	// Rejecting an accepted key (--include-accepted) drops the device.
	if r := c.cli("halite-key", "-r", "d1", "--include-accepted", "-y"); r.code != 0 {
		t.Fatalf("halite-key -r d1 --include-accepted: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 20*time.Second, "d1 gone after its accepted key was rejected", func() bool {
		r := c.cli("halite-run", "manage.up", "--out", "json")
		return r.code == 0 && !strings.Contains(r.stdout, `"d1"`)
	})
	if m, r := c.jsonOut("halite", "-t", "2", "*", "test.ping"); m["r1"] != true || m["d1"] != nil {
		t.Errorf("test.ping '*' after d1's key was rejected: %v, want r1 only\n%s", m, r.stderr)
	}
}
