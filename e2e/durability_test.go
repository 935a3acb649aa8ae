package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// outboxLog is the agent's on-disk outbox.
func (c *cluster) outboxLog(id string) string {
	return filepath.Join(c.root, id, "var", "cache", "halite", "agent", "spool", "outbox.log")
}

// outboxHolds reports whether the agent's outbox file holds s (the bodies
// are CBOR, whose strings are plain bytes).
func (c *cluster) outboxHolds(id, s string) bool {
	b, err := os.ReadFile(c.outboxLog(id))
	return err == nil && bytes.Contains(b, []byte(s))
}

// TestDurableDelivery: returns and events an agent makes while its master
// is down, or across its own restart, reach the master once it is back;
// a return delivered again is stored once and announced once.
func TestDurableDelivery(t *testing.T) {
	c := newCluster(t, "")
	c.startMasterAt("debug")
	c.startAgent("d1", "")
	c.acceptAll("d1")

	// (a) The master dies (SIGKILL) while the job runs; the return waits on
	// the agent's disk and arrives once the master is back.
	jid := asyncJob(t, c, "d1", "test.sleep", "3")
	waitFor(t, 10*time.Second, "d1 to run "+jid, func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.active")
		_, ok := m[jid]
		return ok
	})
	c.kill(c.master)
	// The return's body, whose field 2 is its jid (0x02, then a text
	// string of 20 bytes: 0x74); saltutil.running's returns (jobs.active)
	// hold the jid too, but elsewhere.
	retJID := "\x02\x74" + jid
	waitFor(t, 20*time.Second, "the return in d1's outbox", func() bool { return c.outboxHolds("d1", retJID) })
	// Kept for (c): an outbox holding the return not yet acknowledged.
	unacked, err := os.ReadFile(c.outboxLog("d1"))
	if err != nil {
		t.Fatal(err)
	}
	c.startMasterAt("debug")
	waitFor(t, 30*time.Second, "the return of "+jid+" after the master's restart", func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return m["d1"] == true
	})

	// (b) An event made while the master is down, then the agent stopped
	// (SIGTERM): both restarted, the event arrives.
	c.kill(c.master)
	if r := runCmd(t, "halite-call", "-c", c.agentDir("d1"), "event.send", "dev/offline", `{"n": 1}`); r.code != 0 {
		t.Fatalf("halite-call event.send with the master down: exit %d, %s", r.code, r.stderr)
	}
	if !c.outboxHolds("d1", "dev/offline") {
		t.Fatal("event sent with the master down is not in the agent's outbox")
	}
	c.stop(c.agents["d1"])
	c.startMasterAt("debug")
	lines := c.eventStream(t)
	c.startAgent("d1", "")
	_, ev := nextEvent(t, lines, "dev/offline")
	if d, _ := ev["data"].(map[string]any); ev["id"] != "d1" || d["n"] != float64(1) {
		t.Errorf("event after both restarts: %v, want id d1, data {n: 1}", ev)
	}

	// (c) The agent sends the return again (its outbox as it was before
	// the ack): the master keeps the one it has and fires no second event.
	c.stop(c.agents["d1"])
	if err := os.WriteFile(c.outboxLog("d1"), unacked, 0o600); err != nil {
		t.Fatal(err)
	}
	c.startAgent("d1", "")
	c.waitUp("d1")
	waitFor(t, 20*time.Second, "the master to see the return again", func() bool {
		return strings.Contains(c.master.output(), "duplicate return ignored") &&
			strings.Contains(c.master.output(), jid)
	})
	if r := runCmd(t, "halite-call", "-c", c.agentDir("d1"), "event.send", "dev/marker", `{}`); r.code != 0 {
		t.Fatalf("halite-call event.send: exit %d, %s", r.code, r.stderr)
	}
	retTag := "salt/job/" + jid + "/ret/d1"
	rets := 0
	timeout := time.After(15 * time.Second)
	for marker := false; !marker; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended before dev/marker")
			}
			tag, _, _ := strings.Cut(l, "\t")
			rets += strings.Count(tag, retTag)
			marker = tag == "dev/marker"
		case <-timeout:
			t.Fatal("no dev/marker event within 15s")
		}
	}
	if rets != 0 {
		t.Errorf("return events for %s replayed: got %d, want 0", jid, rets)
	}
	if m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid); len(m) != 1 || m["d1"] != true {
		t.Errorf("jobs.lookup_jid %s after the replay: %v, want {d1: true}", jid, m)
	}
}
