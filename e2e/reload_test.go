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

// TestRefreshModules: saltutil.refresh_modules does through a job what
// SIGHUP does (Salt's module refresh, salt/modules/saltutil.py): a bad
// configuration answers False and changes nothing; a good one is applied
// and its new schedule job runs.
func TestRefreshModules(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	p := c.startAgent("r1", "schedule:\n  ping:\n    function: test.ping\n    seconds: 3600\n")
	c.acceptAll("r1")
	conf := filepath.Join(c.agentDir("r1"), "agent")
	head := fmt.Sprintf("id: r1\nroot_dir: %s\nmaster: 127.0.0.1\nmaster_port: %d\nacceptance_wait_time: 1\nrandom_reauth_delay: 1\nlog_file: ''\n",
		filepath.Join(c.root, "r1"), c.port)
	write := func(schedule string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(head+schedule), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	jobs := func() map[string]any {
		rets, _ := c.jsonOut("halite", "r1", "schedule.list", "return_yaml=False")
		m, _ := rets["r1"].(map[string]any)
		return m
	}

	write("schedule:\n  pong:\n    function: no.such_function\n    seconds: 1\n")
	if rets, r := c.jsonOut("halite", "r1", "saltutil.refresh_modules"); rets["r1"] != false {
		t.Errorf("refresh_modules with a bad schedule: got %v (exit %d), want False", rets["r1"], r.code)
	}
	if m := jobs(); m["ping"] == nil || m["pong"] != nil {
		t.Errorf("after a refused refresh: schedule %v, want ping only", m)
	}
	if !strings.Contains(p.output(), "saltutil.refresh_modules: nothing reloaded") {
		t.Errorf("the refusal is not logged:\n%s", p.output())
	}

	write("schedule:\n  pong:\n    function: test.echo\n    args: [refreshed]\n    seconds: 3600\n")
	if rets, r := c.jsonOut("halite", "r1", "saltutil.refresh_modules"); rets["r1"] != true {
		t.Fatalf("refresh_modules: got %v (exit %d), want True\n%s", rets["r1"], r.code, r.stderr)
	}
	if m := jobs(); m["pong"] == nil || m["ping"] != nil {
		t.Errorf("after the refresh: schedule %v, want pong only", m)
	}
}

// TestSIGHUPReloadsMasterSchedule: SIGHUP makes the master read its
// schedule again (master.Reload): a new job runs its runner as user
// Schedule, as Salt's master schedule does (salt/utils/schedule.py).
func TestSIGHUPReloadsMasterSchedule(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	lines := c.eventStream(t)
	c.extra = "schedule:\n  up:\n    function: manage.up\n    seconds: 1\n"
	c.writeMasterConfig()
	if err := c.master.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for {
		_, ev := nextEvent(t, lines, "salt/run/")
		if ev["user"] == "Schedule" && ev["fun"] == "runner.manage.up" {
			break
		}
	}
	if !strings.Contains(c.master.output(), "SIGHUP: schedule and engines reloaded") {
		t.Errorf("the master does not say it reloaded:\n%s", c.master.output())
	}
}
