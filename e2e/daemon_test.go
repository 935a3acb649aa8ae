package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeLogConf gives a daemon a log file: CONFIG_DIR/<role>.d/log.conf
// (read after the main file, so it overrides its log_file: ”).
func writeLogConf(t *testing.T, confDir, role, conf string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(confDir, role+".d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, role+".d", "log.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// TestSIGHUP: the master, a relay, an agent behind it and an agent direct,
// all real processes, live through SIGHUP (its default action kills);
// after a logrotate-style rename SIGHUP makes each write a new log file;
// SIGHUPs that log past log_rotate_max_bytes rotate the agent's file.
func TestSIGHUP(t *testing.T) {
	c := newCluster(t, relayAllow)
	// log_file is relocated under each daemon's root_dir, c.root/<name>.
	logs := map[string]string{}
	for _, name := range []string{"master", "r1", "d1", "a1"} {
		logs[name] = filepath.Join(c.root, name, "log", name)
	}
	writeLogConf(t, c.masterDir(), "master", "log_file: /log/master\nlog_level_logfile: info\n")
	c.startMaster()
	rPort := freeUDPPort(t)
	writeLogConf(t, c.agentDir("r1"), "agent", "log_file: /log/r1\nlog_level_logfile: info\n")
	c.startAgent("r1", relayConf(rPort))
	writeLogConf(t, c.agentDir("d1"), "agent", "log_file: /log/d1\nlog_level_logfile: info\n")
	c.startBehind("d1", rPort, "")
	writeLogConf(t, c.agentDir("a1"), "agent", "log_file: /log/a1\nlog_level_logfile: info\nlog_rotate_max_bytes: 2048\nlog_rotate_backup_count: 2\n")
	c.startAgent("a1", "")
	c.acceptAll("r1", "a1") // the relay first: d1 enrols through it
	c.acceptAll("r1", "a1", "d1")

	procs := map[string]*proc{"master": c.master, "r1": c.agents["r1"], "d1": c.agents["d1"], "a1": c.agents["a1"]}
	for name, p := range procs {
		if err := os.Rename(logs[name], logs[name]+".old"); err != nil {
			t.Fatalf("rotate %s's log: %v", name, err)
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatalf("SIGHUP %s: %v", name, err)
		}
	}
	for name, p := range procs {
		waitFor(t, 20*time.Second, name+"'s new log file", func() bool {
			select {
			case <-p.done:
				t.Fatalf("%s exited on SIGHUP:\n%s", name, p.output())
			default:
			}
			return fileHas(logs[name], "SIGHUP: log file reopened")
		})
		if !fileHas(logs[name]+".old", "starting") {
			t.Errorf("%s: the renamed log got no start lines, want the old file kept", name)
		}
	}
	// Size rotation: every SIGHUP logs a line; a1's file rotates at 2 KiB
	// and keeps two backups.
	waitFor(t, 30*time.Second, "a1's log rotated twice", func() bool {
		procs["a1"].cmd.Process.Signal(syscall.SIGHUP)
		_, err := os.Stat(logs["a1"] + ".2")
		return err == nil
	})
	for _, sfx := range []string{"", ".1", ".2"} {
		st, err := os.Stat(logs["a1"] + sfx)
		if err != nil || st.Size() >= 2048 {
			t.Errorf("a1 log%s: got %v, %v, want a file under 2048 bytes", sfx, st, err)
		}
	}
	// All still answer.
	m, r := c.jsonOut("halite", "*", "test.ping")
	for _, id := range []string{"r1", "d1", "a1"} {
		if m[id] != true {
			t.Errorf("test.ping after SIGHUP: %s got %v, want true\n%s%s", id, m[id], r.stdout, r.stderr)
		}
	}
	for name, p := range procs {
		select {
		case <-p.done:
			t.Errorf("%s exited:\n%s", name, p.output())
		default:
		}
	}
}

// countLines counts the lines of out that contain every one of parts.
func countLines(out string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(out, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestRetryLogs reads real processes' logs: an agent whose master does not
// answer warns at once with the address and the reason, then retries at
// info (a warning again only a minute later); a master logs a pending
// agent's retries at info once a minute, not at each retry.
func TestRetryLogs(t *testing.T) {
	c := newCluster(t, "")
	// Nobody listens on c.port yet.
	lost := c.startAgent("lost", "")
	addr := "127.0.0.1:" + fmtInt(c.port)
	waitFor(t, 60*time.Second, "lost's second try", func() bool {
		return countLines(lost.output(), "cannot reach master", addr) >= 2
	})
	out := lost.output()
	if n := countLines(out, "[WARNING ]", "cannot reach master", addr, `"error"`); n != 1 {
		t.Errorf("unreachable master: got %d warnings, want 1 (the first try)\n%s", n, out)
	}
	if n := countLines(out, "[INFO    ]", "cannot reach master", addr, `"tries": 2`); n != 1 {
		t.Errorf("second try: got %d info lines with tries 2, want 1\n%s", n, out)
	}

	c.startMaster()
	waitFor(t, 60*time.Second, "four retries of the pending agent", func() bool {
		return countLines(lost.output(), "waiting for the master to accept") >= 4
	})
	if n := countLines(c.master.output(), "[INFO    ]", "agent key not accepted", `"id": "lost"`); n != 1 {
		t.Errorf("master: got %d info lines about lost's pending key, want 1 a minute\n%s", n, c.master.output())
	}
	if n := countLines(lost.output(), "[WARNING ]", "waiting for the master to accept"); n != 1 {
		t.Errorf("agent: got %d warnings about its pending key, want 1 a minute\n%s", n, lost.output())
	}
}
