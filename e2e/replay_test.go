package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJobReplayProcesses: a relay that recorded a signed cmd.run job (the
// tampering build with HALITE_TEST_TAMPER=replay, a real process) sends it
// again, in front of the next job, to a device whose agent restarted
// meanwhile. The device runs the new job and refuses the old one: the
// command ran once.
func TestJobReplayProcesses(t *testing.T) {
	c := newCluster(t, relayAllow)
	c.startMaster()
	port := freeUDPPort(t)
	c.startTampering("r1", "replay", relayConf(port))
	c.acceptAll("r1")
	c.startBehind("d1", port, "")
	c.waitPending(1)
	c.acceptAll("r1", "d1")

	ran := filepath.Join(t.TempDir(), "ran")
	jid := asyncJob(t, c, "-L", "d1", "cmd.run", "echo ran >> "+ran)
	waitFor(t, 30*time.Second, "the cmd.run return", func() bool {
		return returnsOf(c, jid)["d1"] != nil
	})

	c.stop(c.agents["d1"])
	c.startBehind("d1", port, "")
	waitFor(t, 30*time.Second, "d1 back behind r1", func() bool {
		return strings.Contains(c.agents["d1"].output(), "connected to master")
	})
	// The relay sends the recorded cmd.run first, then this job.
	waitFor(t, 30*time.Second, "d1 answering test.ping", func() bool {
		m, _ := c.jsonOut("halite", "-t", "5", "-L", "d1", "test.ping")
		return m["d1"] == true
	})
	waitFor(t, 10*time.Second, "d1 refusing the replayed job", func() bool {
		for _, line := range strings.Split(c.agents["d1"].output(), "\n") {
			if strings.Contains(line, "refusing job: already taken") && strings.Contains(line, jid) {
				return true
			}
		}
		return false
	})
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(b), "ran\n"); got != 1 {
		t.Errorf("the command ran %d times, want 1\nd1:\n%s", got, c.agents["d1"].output())
	}
	if r := returnsOf(c, jid)["d1"]; r != "" {
		t.Errorf("return of %s: got %q, want the first run's (empty output)", jid, r)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// readPid waits for a pid written to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitFor(t, 20*time.Second, path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// TestKilledJobProcesses: the agent is killed (SIGKILL) while a cmd.run
// job runs. The job's shell dies with it, what the shell started in the
// background dies when the agent starts again, and the master gets a
// failed return for the job instead of silence.
func TestKilledJobProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("needs Linux /proc")
	}
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("d1", "")
	c.acceptAll("d1")

	dir := t.TempDir()
	touched := filepath.Join(dir, "X")
	jid := asyncJob(t, c, "d1", "cmd.run",
		fmt.Sprintf("echo $$ > %[1]s/sh.pid; sleep 30 & echo $! > %[1]s/sleep.pid; wait; touch %[2]s", dir, touched))
	shPid, sleepPid := readPid(t, filepath.Join(dir, "sh.pid")), readPid(t, filepath.Join(dir, "sleep.pid"))
	if !alive(shPid) || !alive(sleepPid) {
		t.Fatalf("the job's processes are not running: shell %v, sleep %v", alive(shPid), alive(sleepPid))
	}

	c.kill(c.agents["d1"])
	waitFor(t, 10*time.Second, "the job's shell gone with the agent", func() bool { return !alive(shPid) })
	c.startAgent("d1", "")
	waitFor(t, 20*time.Second, "the job's background process gone once the agent is back", func() bool { return !alive(sleepPid) })
	waitFor(t, 30*time.Second, "the return of the killed job", func() bool {
		r, _ := returnsOf(c, jid)["d1"].(string)
		return strings.Contains(r, "was killed: the agent stopped while it ran")
	})
	if _, err := os.Stat(touched); err == nil {
		t.Error("the killed job's command ran to its end")
	}
}
