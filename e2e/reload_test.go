package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsSchedule: SIGHUP makes the agent read its schedule
// again. A bad schedule is refused whole, with its file and line, and the
// running one goes on; a good one replaces it and its new job runs.
func TestSIGHUPReloadsSchedule(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	p := c.startAgent("h1", "schedule:\n  ping:\n    function: test.ping\n    seconds: 1\n")
	c.acceptAll("h1")
	lines := c.eventStream(t)
	// waitJob waits for a return of schedule job name.
	waitJob := func(name string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("event stream ended")
				}
				tag, body, _ := strings.Cut(l, "\t")
				if !strings.HasPrefix(tag, "salt/job/") || !strings.HasSuffix(tag, "/ret/h1") {
					continue
				}
				var ev map[string]any
				if json.Unmarshal([]byte(body), &ev) == nil && ev["schedule"] == name {
					return
				}
			case <-deadline:
				t.Fatalf("no return of schedule job %s within 30s\n%s", name, p.output())
			}
		}
	}
	waitJob("ping")

	conf := filepath.Join(c.agentDir("h1"), "agent")
	head := fmt.Sprintf("id: h1\nroot_dir: %s\nmaster: 127.0.0.1\nmaster_port: %d\nacceptance_wait_time: 1\nrandom_reauth_delay: 1\nlog_file: ''\n",
		filepath.Join(c.root, "h1"), c.port)
	hup := func(schedule string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(head+schedule), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	// Line 10 of the file: the bad job's function.
	hup("schedule:\n  pong:\n    function: no.such_function\n    seconds: 1\n")
	waitFor(t, 10*time.Second, "the bad schedule refused", func() bool {
		return strings.Contains(p.output(), "SIGHUP: configuration not reloaded")
	})
	if out := p.output(); !strings.Contains(out, conf+":9") {
		t.Errorf("refusal does not name %s:9:\n%s", conf, out)
	}
	waitJob("ping") // still running

	hup("schedule:\n  pong:\n    function: test.echo\n    args: [reloaded]\n    seconds: 1\n")
	waitFor(t, 10*time.Second, "the schedule reloaded", func() bool {
		return strings.Contains(p.output(), "SIGHUP: beacons, schedule and engines reloaded")
	})
	waitJob("pong")
}
