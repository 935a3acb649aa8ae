package e2e

import (
	"os"
	"path/filepath"
	"strings"
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
