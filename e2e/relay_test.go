package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startBehind writes the config of a device agent whose master: is a relay
// listening on relayPort (first time) and starts it.
func (c *cluster) startBehind(id string, relayPort int, extra string) *proc {
	c.t.Helper()
	dir := c.agentDir(id)
	if _, err := os.Stat(filepath.Join(dir, "agent")); err != nil {
		os.MkdirAll(dir, 0o755)
		conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1:%d\nacceptance_wait_time: 1\nlog_file: ''\n%s",
			id, filepath.Join(c.root, id), relayPort, extra)
		if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	c.agents[id] = p
	return p
}

// waitPending waits until n keys are pending (halite-key -L).
func (c *cluster) waitPending(n int) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, fmt.Sprintf("%d keys pending", n), func() bool {
		keys, _ := c.jsonOut("halite-key", "-L")
		pre, _ := keys["minions_pre"].([]any)
		return len(pre) == n
	})
}

// TestRelays: a master, two relays (halite-agent with a relay: section)
// and devices behind them, all real processes: enrolment through a relay,
// jobs fanned out, the master killed while jobs run (their returns wait and
// arrive), a relay restarted.
func TestRelays(t *testing.T) {
	t.Setenv("GOGC", "") // the relays' processes choose (relay: gc_percent)
	c := newCluster(t, relayAllow)
	c.startMaster()
	r1Port, r2Port := freeUDPPort(t), freeUDPPort(t)
	r1 := c.startAgent("r1", fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n  heartbeat: 1\n", r1Port))
	r2 := c.startAgent("r2", fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n  gc_percent: 35\n", r2Port))
	// A relay's process runs at its gc_percent: the default, and r2's.
	for _, w := range []struct {
		p    *proc
		want string
	}{{r1, `"gogc": 50, "from": "relay: gc_percent"`}, {r2, `"gogc": 35, "from": "relay: gc_percent"`}} {
		waitFor(t, 10*time.Second, w.p.name+" logs its GOGC", func() bool { return strings.Contains(w.p.output(), w.want) })
	}
	c.acceptAll("r1", "r2")

	// Enrolment: the devices' keys wait, pending, until accepted.
	c.startBehind("d1", r1Port, "grains:\n  role: camera\n")
	c.startBehind("d2", r1Port, "grains:\n  role: sensor\n")
	c.startBehind("d3", r2Port, "grains:\n  role: camera\n")
	c.waitPending(3)
	// halite-key names the relay each pending key came through.
	keys, r := c.jsonOut("halite-key", "-L")
	if got, want := fmt.Sprint(keys["relays"]), "map[d1:r1 d2:r1 d3:r2]"; got != want {
		t.Errorf("halite-key -L --out json: relays %s, want %s\n%s", got, want, r.stdout)
	}
	if r = c.cli("halite-key", "-l", "un"); r.stdout != "Unaccepted Keys:\nd1 (via r1)\nd2 (via r1)\nd3 (via r2)\n" {
		t.Errorf("halite-key -l un: got %q, want the relays marked", r.stdout)
	}
	c.acceptAll("r1", "r2", "d1", "d2", "d3")
	if keys, r := c.jsonOut("halite-key", "-L"); keys["relays"] != nil {
		t.Errorf("halite-key -L --out json after acceptance: relays %v, want none\n%s", keys["relays"], r.stdout)
	}

	m, r := c.jsonOut("halite", "*", "test.ping")
	for _, id := range []string{"r1", "r2", "d1", "d2", "d3"} {
		if m[id] != true {
			t.Errorf("test.ping '*': %s returned %v, want true\n%s%s", id, m[id], r.stdout, r.stderr)
		}
	}
	m, r = c.jsonOut("halite", "-G", "role:camera", "test.ping")
	if len(m) != 2 || m["d1"] != true || m["d3"] != true {
		t.Errorf("test.ping -G role:camera: got %v, want d1 and d3\n%s", m, r.stderr)
	}

	// The master dies while the devices run a job; their returns wait
	// (in the relay and in the devices' outboxes) and reach the master
	// once it is back.
	jid := asyncJob(t, c, "d*", "test.sleep", "5")
	waitRunning(t, c, jid, 3)
	c.kill(c.master)
	retJID := "\x02\x74" + jid
	for _, id := range []string{"d1", "d2", "d3"} {
		waitFor(t, 30*time.Second, "the return in "+id+"'s outbox", func() bool { return c.outboxHolds(id, retJID) })
	}
	c.startMaster()
	waitFor(t, 60*time.Second, "the returns of "+jid+" after the master's restart", func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return m["d1"] == true && m["d2"] == true && m["d3"] == true
	})

	// A relay restarts: its devices come back.
	c.stop(c.agents["r1"])
	c.startAgent("r1", "")
	// Back for real, not as sessions the relay resumes to deliver what
	// they left (which the master also lists as up).
	waitFor(t, 30*time.Second, "d1 and d2 back behind the restarted r1", func() bool {
		back := map[string]bool{}
		for _, line := range strings.Split(c.agents["r1"].output(), "\n") {
			for _, id := range []string{"d1", "d2"} {
				if strings.Contains(line, "device connected") && strings.Contains(line, `"device": "`+id+`"`) {
					back[id] = true
				}
			}
		}
		return back["d1"] && back["d2"]
	})
	c.waitUp("r1", "d1", "d2")
	m, r = c.jsonOut("halite", "-L", "d1,d2", "test.ping")
	if m["d1"] != true || m["d2"] != true {
		t.Errorf("test.ping d1,d2 after r1's restart: got %v\n%s", m, r.stderr)
	}
	// manage.down lists a device whose agent stopped.
	c.stop(c.agents["d3"])
	waitFor(t, 30*time.Second, "d3 down", func() bool {
		r := c.cli("halite-run", "manage.down", "--out", "json")
		return strings.Contains(r.stdout, `"d3"`)
	})
}

// TestRelayTamperProcesses: relays that alter what they forward, as real
// processes (halite-agent built with -tags halite_tamper, which flips a
// byte of the signed body of every job, or every return, it forwards).
// The device refuses the altered job, the master the altered return:
// neither device's answer arrives, while the relays themselves, whose own
// sessions are not altered, answer as usual.
func TestRelayTamperProcesses(t *testing.T) {
	c := newCluster(t, relayAllow)
	c.startMaster()
	p1, p2 := freeUDPPort(t), freeUDPPort(t)
	c.startTampering("r1", "job", relayConf(p1))
	c.startTampering("r2", "return", relayConf(p2))
	c.acceptAll("r1", "r2")
	c.startBehind("d1", p1, "")
	c.startBehind("d2", p2, "")
	c.waitPending(2)
	c.acceptAll("r1", "r2", "d1", "d2")
	c.waitUp("r1", "r2", "d1", "d2")

	m, r := c.jsonOut("halite", "-t", "5", "-L", "r1,r2,d1,d2", "test.ping")
	if m["r1"] != true || m["r2"] != true {
		t.Errorf("test.ping: the relays answered %v, %v; want true (their own sessions are not altered)\n%s", m["r1"], m["r2"], r.stderr)
	}
	for _, id := range []string{"d1", "d2"} {
		if m[id] == true {
			t.Errorf("test.ping: %s returned true through a tampering relay\n%s", id, r.stdout)
		}
	}
	// And each end said why.
	waitFor(t, 10*time.Second, "d1 refusing the altered job", func() bool {
		return strings.Contains(c.agents["d1"].output(), "signature")
	})
	waitFor(t, 10*time.Second, "the master refusing d2's altered return", func() bool {
		out := c.master.output()
		return strings.Contains(out, "d2") && strings.Contains(out, "bad signature")
	})
}
