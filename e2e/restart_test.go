package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestarts: an agent restarted, and a master killed and restarted
// while agents run; the agents come back by themselves and nothing needs
// accepting again.
func TestRestarts(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	for _, id := range []string{"a1", "a2", "a3"} {
		c.startAgent(id, "")
	}
	c.acceptAll("a1", "a2", "a3")

	c.stop(c.agents["a2"])
	c.startAgent("a2", "")
	c.waitUp("a1", "a2", "a3")
	if rets, r := c.jsonOut("halite", "*", "test.ping"); len(rets) != 3 || r.code != 0 {
		t.Fatalf("after agent restart: exit %d, %v", r.code, rets)
	}

	r := c.cli("halite", "--async", "*", "test.echo", "before")
	jid := strings.TrimSpace(strings.TrimPrefix(r.stdout, "Executed command with job ID: "))
	waitFor(t, 10*time.Second, "returns before the kill", func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return len(m) == 3
	})
	c.kill(c.master)
	c.startMaster()
	c.waitUp("a1", "a2", "a3")
	if rets, r := c.jsonOut("halite", "*", "test.ping"); len(rets) != 3 || r.code != 0 {
		t.Fatalf("after master restart: exit %d, %v", r.code, rets)
	}
	// The job cache survived the kill.
	if m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid); len(m) != 3 {
		t.Errorf("jobs.lookup_jid %s after master restart: %v", jid, m)
	}
}

// TestBadConfig: a malformed config names the file and line and exits 2;
// a bad flag exits 64.
func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "master"), []byte("interface: 127.0.0.1\nport: abc\n"), 0o644)
	r := runCmd(t, "halite-master", "-c", dir)
	if r.code != 2 || !strings.Contains(r.stderr, filepath.Join(dir, "master")+":2") {
		t.Errorf("port: abc: exit %d, stderr %q; want 2 and %s:2", r.code, r.stderr, filepath.Join(dir, "master"))
	}
	os.WriteFile(filepath.Join(dir, "agent"), []byte("id: x\ngrains: [unclosed\n"), 0o644)
	r = runCmd(t, "halite-agent", "-c", dir)
	if r.code != 2 || !strings.Contains(r.stderr, filepath.Join(dir, "agent")+":") {
		t.Errorf("bad YAML: exit %d, stderr %q; want 2 and the file:line", r.code, r.stderr)
	}
	r = runCmd(t, "halite-master", "--no-such-flag")
	if r.code != 64 {
		t.Errorf("bad flag: exit %d, want 64 (EX_USAGE, as Salt's daemons)", r.code)
	}
	// An unknown key is a warning, not an error.
	os.WriteFile(filepath.Join(dir, "master"), []byte("interface: 127.0.0.1\nno_such_option: 1\n"), 0o644)
	r = runCmd(t, "halite-run", "-c", dir, "manage.status")
	if !strings.Contains(r.stderr, "connect to master") {
		t.Errorf("with no master running: stderr %q, want a clear 'connect to master' error", r.stderr)
	}
	if r.code != 1 {
		t.Errorf("with no master running: exit %d, want 1", r.code)
	}
}
