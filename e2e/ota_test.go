package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Over-the-air updates with real processes (agent/ota has the design):
// the master's firmware_dir holds builds made here with -ldflags versions:
// 2.0.0 (good), 3.0.0 (built with -tags halite_unreachable: it dials the
// wrong port, never reaches a master) and 4.0.0 (not a program: it cannot
// start). Each agent runs its own copy of the e2e build ("devel"), which
// the update replaces.

const versionPkg = "github.com/halite-fleet/halite/internal/version"

var (
	fwOnce sync.Once
	fwDir  string
	fwErr  error
)

func platform() string { return runtime.GOOS + "-" + runtime.GOARCH }

// firmwareDir builds the firmware_dir once for the run.
func firmwareDir(t *testing.T) string {
	t.Helper()
	fwOnce.Do(func() {
		fwDir = filepath.Join(binDir, "firmware")
		build := func(version string, tags ...string) error {
			out := filepath.Join(fwDir, version, platform(), "halite-agent")
			args := []string{"build", "-o", out, "-ldflags", "-X " + versionPkg + ".Version=" + version}
			if len(tags) > 0 {
				args = append(args, "-tags", strings.Join(tags, ","))
			}
			cmd := exec.Command("go", append(args, "../cmd/halite-agent")...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			return cmd.Run()
		}
		if fwErr = build("2.0.0"); fwErr == nil {
			fwErr = build("3.0.0", "halite_unreachable")
		}
		if fwErr == nil {
			bad := filepath.Join(fwDir, "4.0.0", platform(), "halite-agent")
			os.MkdirAll(filepath.Dir(bad), 0o755)
			fwErr = os.WriteFile(bad, []byte("\x7fELF but not really: a build that cannot start\n"), 0o755)
		}
	})
	if fwErr != nil {
		t.Fatalf("build the firmware builds: %v", fwErr)
	}
	return fwDir
}

// installAgent copies the e2e agent to the device's own folder (the update
// replaces it there) and returns its path.
func (c *cluster) installAgent(id string) string {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(binDir, "halite-agent"))
	if err != nil {
		c.t.Fatal(err)
	}
	bin := filepath.Join(c.root, id, "bin", "halite-agent")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return bin
}

// startInstalled starts the device's installed build, as its init would.
func (c *cluster) startInstalled(id string) *proc {
	c.t.Helper()
	p := c.startRaw(filepath.Join(c.root, id, "bin", "halite-agent"), "-c", c.agentDir(id), "-l", "info")
	c.agents[id] = p
	return p
}

// fwStatus is firmware.status of id.
func (c *cluster) fwStatus(id string) map[string]any {
	c.t.Helper()
	m, _ := c.jsonOut("halite", id, "firmware.status", "-t", "5")
	st, _ := m[id].(map[string]any)
	return st
}

// waitResult waits until id runs version and reports result as its last
// update's, the update to tried, with no trial pending.
func (c *cluster) waitResult(id, version, tried, result string, d time.Duration, reason ...string) map[string]any {
	c.t.Helper()
	var st map[string]any
	waitFor(c.t, d, fmt.Sprintf("%s running %s after the update to %s %s", id, version, tried, result), func() bool {
		st = c.fwStatus(id)
		last, _ := st["last"].(map[string]any)
		if len(reason) > 0 && last != nil && !strings.Contains(fmt.Sprint(last["reason"]), reason[0]) {
			return false
		}
		return st["version"] == version && last != nil && last["result"] == result && last["version"] == tried && st["trial"] == false
	})
	return st
}

const otaAgent = "update_trial_timeout: 5\n"

func TestOTA(t *testing.T) {
	fw := firmwareDir(t)
	c := newCluster(t, "firmware_dir: "+fw+"\n")
	c.startMaster()
	for _, id := range []string{"dev1", "dev2"} {
		c.writeAgentConfig(id, otaAgent)
		c.installAgent(id)
		c.startInstalled(id)
	}
	c.acceptAll("dev1", "dev2")

	st := c.fwStatus("dev1")
	if st["version"] != "devel" || st["platform"] != platform() || st["trial"] != false {
		t.Fatalf("firmware.status before any update: %v", st)
	}

	t.Run("update", func(t *testing.T) {
		m, r := c.jsonOut("halite", "dev1", "firmware.update", "version=2.0.0")
		ret, _ := m["dev1"].(map[string]any)
		if ret["result"] != "trial" || r.code != 0 {
			t.Fatalf("firmware.update: %v (exit %d)\n%s%s", m, r.code, r.stdout, r.stderr)
		}
		st := c.waitResult("dev1", "2.0.0", "2.0.0", "updated", 60*time.Second)
		if st["on_trial"] != false || st["trial"] != false {
			t.Errorf("after the update: %v", st)
		}
		bin := filepath.Join(c.root, "dev1", "bin", "halite-agent")
		if _, err := os.Stat(bin + ".prev"); err != nil {
			t.Errorf("the previous build was not kept: %v", err)
		}
		if _, err := os.Stat(bin + ".new"); err == nil {
			t.Errorf("%s.new left behind", bin)
		}
		// Same process id: the watchdog exec'd the committed build.
		if pid := c.agents["dev1"].cmd.Process.Pid; syscall.Kill(pid, 0) != nil {
			t.Errorf("the agent's process %d is gone", pid)
		}
	})

	t.Run("unreachable build rolled back", func(t *testing.T) {
		c.jsonOut("halite", "dev2", "firmware.update", "version=3.0.0")
		st := c.waitResult("dev2", "devel", "3.0.0", "rolled_back", 60*time.Second)
		last := st["last"].(map[string]any)
		if !strings.Contains(fmt.Sprint(last["reason"]), "update_trial_timeout") {
			t.Errorf("reason %v, want the trial timeout", last["reason"])
		}
	})

	t.Run("build that cannot start rolled back", func(t *testing.T) {
		c.jsonOut("halite", "dev2", "firmware.update", "version=4.0.0")
		st := c.waitResult("dev2", "devel", "4.0.0", "rolled_back", 60*time.Second, "did not start")
		if last := st["last"].(map[string]any); !strings.Contains(fmt.Sprint(last["reason"]), "did not start") {
			t.Errorf("reason %v, want the start failure", last["reason"])
		}
	})

	t.Run("no such build", func(t *testing.T) {
		m, _ := c.jsonOut("halite", "dev2", "firmware.update", "version=9.9.9")
		if !strings.Contains(fmt.Sprint(m["dev2"]), "no build 9.9.9") {
			t.Errorf("firmware.update of a missing build: %v", m)
		}
	})

	t.Run("kill -9 of the build on trial", func(t *testing.T) {
		// The watchdog sees its child die before a master accepted it.
		// The CLI runs beside the wait: the trial lasts 5 s here, and a
		// loaded machine can take that long to print the job's return.
		done := make(chan struct{})
		var r result
		go func() {
			defer close(done)
			r = c.cli("halite", "dev2", "firmware.update", "version=3.0.0")
		}()
		var child int
		binDir, err := filepath.EvalSymlinks(filepath.Join(c.root, "dev2", "bin"))
		if err != nil {
			t.Fatal(err)
		}
		trial := filepath.Join(binDir, "halite-agent.new")
		waitFor(t, 30*time.Second, "the build on trial", func() bool {
			child = childRunning(c.agents["dev2"].cmd.Process.Pid, trial)
			return child > 0
		})
		syscall.Kill(child, syscall.SIGKILL)
		<-done
		if r.code != 0 {
			t.Errorf("firmware.update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		c.waitResult("dev2", "devel", "3.0.0", "rolled_back", 60*time.Second, "signal: killed")
	})

	t.Run("kill -9 during the trial", func(t *testing.T) {
		bin := filepath.Join(c.root, "dev2", "bin", "halite-agent")
		done := make(chan struct{})
		var r result
		go func() { // beside the wait, as above
			defer close(done)
			r = c.cli("halite", "dev2", "firmware.update", "version=3.0.0")
		}()
		waitFor(t, 30*time.Second, "the trial to start", func() bool {
			_, err := os.Stat(bin + ".trial")
			return err == nil && c.agents["dev2"].output() != "" && strings.Contains(c.agents["dev2"].output(), "update on trial: started")
		})
		c.kill(c.agents["dev2"]) // the watchdog; the build on trial dies with it
		<-done
		// The kill may come before the job's return left the agent (it is
		// then reported killed at the next start, after the CLI gave up):
		// either the return or "did not return", nothing else.
		if r.code != 0 && !strings.Contains(r.stdout+r.stderr, "Minion did not return") {
			t.Errorf("firmware.update: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		c.startInstalled("dev2") // init starts B again
		st := c.waitResult("dev2", "devel", "3.0.0", "rolled_back", 60*time.Second, "did not finish")
		if last := st["last"].(map[string]any); !strings.Contains(fmt.Sprint(last["reason"]), "did not finish") {
			t.Errorf("reason %v", last["reason"])
		}
	})
}

// childRunning returns a child process of pid that runs the program exe,
// 0 if none: the agent may have other children (a grain's or a module's
// command) beside the build on trial.
func childRunning(pid int, exe string) int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, e.Name()))
		for _, f := range strings.Fields(string(b)) {
			var child int
			if _, err := fmt.Sscan(f, &child); err != nil {
				continue
			}
			if got, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", child)); got == exe {
				return child
			}
		}
	}
	return 0
}

// TestOTARelay: devices behind a relay updated by firmware.rollout, a
// rollout of the unreachable build halted by its failure budget.
func TestOTARelay(t *testing.T) {
	fw := firmwareDir(t)
	c := newCluster(t, "relay_allow: [relay1]\nfirmware_dir: "+fw+"\n")
	c.startMaster()
	rPort := freeUDPPort(t)
	c.startAgent("relay1", fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n", rPort))
	c.acceptAll("relay1")
	ids := []string{"cam1", "cam2", "cam3"}
	for _, id := range ids {
		os.MkdirAll(c.agentDir(id), 0o755)
		conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1:%d\nacceptance_wait_time: 1\nlog_file: ''\n%s",
			id, filepath.Join(c.root, id), rPort, otaAgent)
		if err := os.WriteFile(filepath.Join(c.agentDir(id), "agent"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.installAgent(id)
		c.startInstalled(id)
	}
	c.acceptAll(append([]string{"relay1"}, ids...)...)

	// On a terminal the rollout shows each device's outcome and each
	// batch as they come.
	r := c.cliTTY("halite-run", "firmware.rollout", "cam*", "version=3.0.0", "batch=1", "max_failures=0", "timeout=60", "--out", "json")
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("rollout --out json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if m["result"] != false || len(m["rolled_back"].([]any)) != 1 || m["not_started"] != float64(2) {
		t.Errorf("rollout of the unreachable build: %v\n%s", m, r.stderr)
	}
	for _, want := range []string{"rolled_back: 0 of 3 updated, 1 failed", "batch 1 done: 1 of 3 devices, 0 updated, 1 failed (max_failures 0)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("rollout progress on a terminal: %q missing from %q", want, r.stderr)
		}
	}
	m, r2 := c.jsonOut("halite-run", "firmware.rollout", "cam*", "version=2.0.0", "batch=2", "timeout=60")
	if m["result"] != true || len(m["updated"].([]any)) != 3 || m["batches"] != float64(2) {
		t.Errorf("rollout of the good build: %v\n%s", m, r2.stderr)
	}
	for _, id := range ids {
		c.waitResult(id, "2.0.0", "2.0.0", "updated", 30*time.Second)
	}
	m, _ = c.jsonOut("halite-run", "firmware.rollout", "cam*", "version=2.0.0")
	if len(m["skipped"].([]any)) != 3 {
		t.Errorf("a second rollout of 2.0.0: %v, want every device skipped", m)
	}
}
