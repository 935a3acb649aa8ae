package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/fulldisk"
	"github.com/halite-fleet/halite/internal/reclog"
)

// outboxRecords reads the records of an agent's outbox log.
func (c *cluster) outboxRecords(id string) (recs []reclog.Record, offs []int) {
	b, _ := os.ReadFile(c.outboxLog(id))
	reclog.Scan(b, 8<<20, func(off, _ int, r reclog.Record, _ int) bool {
		recs, offs = append(recs, r), append(offs, off)
		return true
	})
	return recs, offs
}

// collectEvents counts the events whose tag starts with prefix until the
// tag marker comes.
func collectEvents(t *testing.T, lines <-chan string, prefix, marker string) map[string]int {
	t.Helper()
	got := make(map[string]int)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("event stream ended before %s", marker)
			}
			tag, _, _ := strings.Cut(l, "\t")
			if tag == marker {
				return got
			}
			if strings.HasPrefix(tag, prefix) {
				got[tag]++
			}
		case <-timeout:
			t.Fatalf("no event %s within 30s; got %v", marker, got)
		}
	}
}

func sendEvent(t *testing.T, c *cluster, id, tag, data string) result {
	t.Helper()
	return runCmd(t, "halite-call", "-c", c.agentDir(id), "event.send", tag, data)
}

// TestSpoolFullDisk: an agent whose cachedir (a small tmpfs) is full
// refuses the events it cannot keep (halite-call fails); those sent once
// there is room again reach the master after the agent's restart, each
// once, none lost behind the write that failed.
func TestSpoolFullDisk(t *testing.T) {
	c := newCluster(t, "")
	c.writeAgentConfig("d1", "")
	disk := fulldisk.MountOn(t, filepath.Join(c.root, "d1", "var", "cache", "halite", "agent"), 1<<20)
	c.startMasterAt("info")
	c.startAgent("d1", "")
	c.acceptAll("d1")
	c.waitUp("d1")
	c.kill(c.master) // what follows waits in the outbox

	if r := sendEvent(t, c, "d1", "disk/before", `{}`); r.code != 0 {
		t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
	}
	disk.Fill(4096)
	big := fmt.Sprintf(`{"pad": %q}`, strings.Repeat("x", 32<<10)) // more than is left: written in part
	if r := sendEvent(t, c, "d1", "disk/full/big", big); r.code == 0 {
		t.Fatalf("event.send of a large event on a full disk: exit 0, %q; want a failure", r.stdout)
	}
	disk.Fill(0)
	// Past what the log's last page has left.
	if r := sendEvent(t, c, "d1", "disk/full/page", fmt.Sprintf(`{"pad": %q}`, strings.Repeat("y", 5000))); r.code == 0 {
		t.Fatalf("event.send on a full disk: exit 0, %q; want a failure", r.stdout)
	}
	disk.Free()
	for i := range 10 {
		if r := sendEvent(t, c, "d1", fmt.Sprintf("disk/after/%d", i), `{}`); r.code != 0 {
			t.Fatalf("event.send %d with room again: exit %d, %s", i, r.code, r.stderr)
		}
	}
	c.kill(c.agents["d1"])
	c.startMasterAt("info")
	lines := c.eventStream(t)
	c.startAgent("d1", "")
	c.waitUp("d1")
	if r := sendEvent(t, c, "d1", "disk/marker", `{}`); r.code != 0 {
		t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
	}
	got := collectEvents(t, lines, "disk/", "disk/marker")
	want := map[string]int{"disk/before": 1}
	for i := range 10 {
		want[fmt.Sprintf("disk/after/%d", i)] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events after the restart: got %v, want %v", got, want)
	}
}

// TestSpoolBitFlip: a flipped bit in an acknowledged record and one in a
// record waiting, in a stopped agent's outbox, cost the waiting one only:
// after a restart every later event arrives once, none acknowledged is
// sent again, and the agent logs the file and the bytes it dropped.
func TestSpoolBitFlip(t *testing.T) {
	c := newCluster(t, "")
	c.startMasterAt("info")
	c.startAgent("d2", "")
	c.acceptAll("d2")
	c.waitUp("d2")
	lines := c.eventStream(t)
	for i := 1; i <= 5; i++ {
		if r := sendEvent(t, c, "d2", fmt.Sprintf("flip/acked/%d", i), `{}`); r.code != 0 {
			t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
		}
	}
	if r := sendEvent(t, c, "d2", "flip/marker1", `{}`); r.code != 0 {
		t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
	}
	if got := collectEvents(t, lines, "flip/acked/", "flip/marker1"); len(got) != 5 {
		t.Fatalf("acked events: got %v, want 5", got)
	}
	// The master's ack of them all is in the log: a trim past the marker.
	waitFor(t, 20*time.Second, "the ack of d2's events in its outbox", func() bool {
		recs, _ := c.outboxRecords("d2")
		var marker uint64
		for _, r := range recs {
			if r.Kind != 't' && strings.Contains(string(r.Body), "flip/marker1") {
				marker = r.Seq
			}
			if r.Kind == 't' && marker != 0 && r.Seq >= marker {
				return true
			}
		}
		return false
	})
	c.kill(c.master)
	for i := 1; i <= 20; i++ {
		if r := sendEvent(t, c, "d2", fmt.Sprintf("flip/wait/%02d", i), `{}`); r.code != 0 {
			t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
		}
	}
	c.stop(c.agents["d2"])

	path := c.outboxLog("d2")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs, offs := c.outboxRecords("d2")
	flipped := 0
	for i, r := range recs {
		if body := string(r.Body); strings.Contains(body, "flip/acked/3") || strings.Contains(body, "flip/wait/07") {
			b[offs[i]+reclog.HeaderSize+len(r.Body)/2] ^= 0x10
			flipped++
		}
	}
	if flipped != 2 {
		t.Fatalf("flipped %d records, want 2 (acked/3 and wait/07) in %d records", flipped, len(recs))
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	c.startMasterAt("info")
	lines = c.eventStream(t)
	p := c.startAgent("d2", "")
	c.waitUp("d2")
	if r := sendEvent(t, c, "d2", "flip/marker2", `{}`); r.code != 0 {
		t.Fatalf("event.send: exit %d, %s", r.code, r.stderr)
	}
	got := collectEvents(t, lines, "", "flip/marker2")
	want := map[string]int{}
	for i := 1; i <= 20; i++ {
		if i != 7 {
			want[fmt.Sprintf("flip/wait/%02d", i)] = 1
		}
	}
	for tag := range got {
		if !strings.HasPrefix(tag, "flip/") {
			delete(got, tag) // the master's own
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events after the restart: got %v, want %v", got, want)
	}
	out := p.output()
	if !strings.Contains(out, "damage dropped") || !strings.Contains(out, path) || !strings.Contains(out, `"ranges": [{"From":`) {
		t.Errorf("agent log does not name the damage in %s:\n%s", path, out)
	}
}
