package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWaiting starts agent id with acceptance_wait_time: 60 and master:
// master (host:port), and waits until it is held pending on its
// connection.
func (c *cluster) startWaiting(id, master string) *proc {
	c.t.Helper()
	dir := c.agentDir(id)
	os.MkdirAll(dir, 0o755)
	conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: %s\nacceptance_wait_time: 60\nlog_file: ''\n",
		id, filepath.Join(c.root, id), master)
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
		c.t.Fatal(err)
	}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	c.agents[id] = p
	waitFor(c.t, 20*time.Second, id+" waiting on its connection", func() bool {
		return strings.Contains(p.output(), "waiting on the connection for the master to decide")
	})
	return p
}

// TestKeyToldAtOnce: agents that wait 60 s between tries (acceptance_wait_time)
// answer a job within seconds of their key's acceptance, directly and
// through a relay, because the master tells them on the connection it
// holds open; a rejected key is told at once too.
func TestKeyToldAtOnce(t *testing.T) {
	c := newCluster(t, relayAllow)
	c.startMaster()
	rPort := freeUDPPort(t)
	c.startAgent("r1", fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n", rPort))
	c.acceptAll("r1")

	direct := fmt.Sprintf("127.0.0.1:%d", c.port)
	viaRelay := fmt.Sprintf("127.0.0.1:%d", rPort)
	for _, tt := range []struct{ id, master string }{{"cam1", direct}, {"dev1", viaRelay}} {
		c.startWaiting(tt.id, tt.master)
		start := time.Now()
		if r := c.cli("halite-key", "-a", tt.id, "-y"); r.code != 0 {
			t.Fatalf("halite-key -a %s -y: exit %d\n%s%s", tt.id, r.code, r.stdout, r.stderr)
		}
		rets, r := c.jsonOut("halite", "-t", "10", tt.id, "test.ping")
		if rets[tt.id] != true {
			t.Errorf("%s: halite %s test.ping right after the accept: got %v, want true\n%s%s", tt.id, tt.id, rets, r.stdout, r.stderr)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: answered %v after the accept, want within seconds (its next try is 60 s away)", tt.id, d.Round(time.Second))
		}
	}

	p := c.startWaiting("cam2", direct)
	if r := c.cli("halite-key", "-r", "cam2", "-y"); r.code != 0 {
		t.Fatalf("halite-key -r cam2 -y: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 10*time.Second, "cam2 told its key is rejected", func() bool {
		return strings.Contains(p.output(), "key rejected by the master")
	})
}
