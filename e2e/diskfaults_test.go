package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// jobsDB is the master's job cache file.
func (c *cluster) jobsDB() string {
	return filepath.Join(c.root, "master", "var", "cache", "halite", "master", "jobs.db")
}

// TestTruncatedJobCache: a master started on a jobs.db cut short (a full
// disk, a copy that stopped) exits at once, non-zero, with an error naming
// the file and saying what to do; done, the master starts again. Before,
// bbolt mapped the file and the master died of SIGBUS on the first job, at
// every restart.
func TestTruncatedJobCache(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("t1", "")
	c.acceptAll("t1")
	for range 5 {
		if r := c.cli("halite", "t1", "test.ping"); r.code != 0 {
			t.Fatalf("halite t1 test.ping: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	c.stop(c.master)
	db := c.jobsDB()
	fi, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	// Three pages: both meta pages and one more, fewer than the file's
	// pages in use.
	if err := os.Truncate(db, 3*4096); err != nil {
		t.Fatal(err)
	}
	t.Logf("jobs.db cut from %d to %d bytes", fi.Size(), 3*4096)

	c.writeMasterConfig()
	p := c.start("halite-master", "-c", c.masterDir(), "-l", "info")
	c.master = p
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("master on a truncated jobs.db still runs after 20 s:\n%s", p.output())
	}
	out := p.output()
	if code := p.cmd.ProcessState.ExitCode(); code == 0 || code == -1 {
		t.Errorf("master exit status: got %d (%v), want non-zero\n%s", code, p.cmd.ProcessState, out)
	}
	for _, w := range []string{db, "is damaged", "truncated", "move it aside"} {
		if !strings.Contains(out, w) {
			t.Errorf("master output does not say %q:\n%s", w, out)
		}
	}

	// Done as told, the master starts with a new job cache.
	if err := os.Rename(db, db+".damaged"); err != nil {
		t.Fatal(err)
	}
	c.startMaster()
	c.waitUp("t1")
	if r := c.cli("halite", "t1", "test.ping"); r.code != 0 {
		t.Fatalf("halite t1 test.ping with a new job cache: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// fillDisk writes path until its file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v, want ENOSPC at the end", path, err)
			}
			return
		}
	}
}

// TestFullDiskHoldsReturns: a master whose cachedir is full keeps its
// agents' sessions, says so once (not once per return), acknowledges none
// of the returns it could not store, and stores and announces each once
// the disk has room again. Before, each failed save dropped the agent's
// session, which came back and failed again (98 reconnects a minute).
func TestFullDiskHoldsReturns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs as the master's cachedir needs root")
	}
	c := newCluster(t, "")
	cache := filepath.Join(c.root, "master", "var", "cache", "halite", "master")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", cache).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s (as root): %v\n%s", cache, err, out)
	}
	t.Cleanup(func() {
		if c.master != nil {
			c.stop(c.master)
		}
		if out, err := exec.Command("umount", cache).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", cache, err, out)
		}
	})
	c.startMaster()
	c.startAgent("f1", "")
	c.acceptAll("f1")
	lines := c.eventStream(t)
	start := time.Now()

	filler := filepath.Join(cache, "filler")
	fillDisk(t, filler)
	// Returns of 100 KiB: the job cache must grow its file for them.
	big := strings.Repeat("x", 100<<10)
	var jids []string
	for range 4 {
		jids = append(jids, asyncJob(t, c, "f1", "test.arg", big))
	}
	const said = "job cache cannot store returns"
	waitFor(t, 30*time.Second, "the master to say that the job cache cannot store returns", func() bool {
		return strings.Contains(c.master.output(), said)
	})
	// Not stored, not acknowledged: the agent keeps the return.
	kept := 0
	for _, jid := range jids {
		if c.outboxHolds("f1", "\x02\x74"+jid) {
			kept++
		}
	}
	t.Logf("returns kept in f1's outbox while the disk is full: %d of %d", kept, len(jids))
	if kept == 0 {
		t.Errorf("none of the returns of %v is in f1's outbox while the disk is full; want them kept, unacknowledged", jids)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, jid := range jids {
		waitFor(t, 30*time.Second, "the return of "+jid+" stored once the disk has room", func() bool {
			m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
			_, ok := m["f1"]
			return ok
		})
	}
	// Each announced once.
	seen := map[string]int{}
	timeout := time.After(15 * time.Second)
	for len(seen) < len(jids) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended")
			}
			tag, _, _ := strings.Cut(l, "\t")
			for _, jid := range jids {
				if tag == "salt/job/"+jid+"/ret/f1" {
					seen[jid]++
				}
			}
		case <-timeout:
			t.Fatalf("return events: got %v, want one for each of %v", seen, jids)
		}
	}
	for jid, n := range seen {
		if n != 1 {
			t.Errorf("return events of %s: got %d, want 1", jid, n)
		}
	}

	out := c.master.output()
	if n := strings.Count(out, "agent connected"); n != 1 {
		t.Errorf("f1 connected %d times, want once: the session stays up while the disk is full\n%s", n, out)
	}
	if n, most := strings.Count(out, said), 1+int(time.Since(start)/(10*time.Second)); n > most {
		t.Errorf("the master said %q %d times in %v, want at most %d (once per 10 s)", said, n, time.Since(start), most)
	}
	if !strings.Contains(out, "job cache stores returns again") {
		t.Errorf("the master did not say that the job cache stores returns again:\n%s", out)
	}
}
