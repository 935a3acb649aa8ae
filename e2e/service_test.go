package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serviceDir holds the service files (firmware/service).
const serviceDir = "../firmware/service"

// TestServiceUnits checks the systemd units with systemd-analyze verify,
// their ExecStart pointed at the binaries built for the test (verify
// wants them to exist).
func TestServiceUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze on this machine")
	}
	dir := t.TempDir()
	for _, name := range []string{"halite-master.service", "halite-agent.service", "halite-relay.service"} {
		b, err := os.ReadFile(filepath.Join(serviceDir, name))
		if err != nil {
			t.Fatal(err)
		}
		unit := strings.ReplaceAll(string(b), "/usr/bin/", binDir+"/")
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(sa, "verify", path).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: got %v\n%s, want it clean", name, err, out)
		}
		for _, want := range []string{"Restart=on-failure", "RestartSec=", "ExecReload=/bin/kill -HUP $MAINPID"} {
			if !strings.Contains(unit, want) {
				t.Errorf("%s: got no %s, want it", name, want)
			}
		}
	}
}

// shells are the shells the init script must parse and run in: POSIX sh,
// dash and BusyBox's ash when present.
func shells(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, sh := range []string{"sh", "dash"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, []string{p})
		}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out = append(out, []string{p, "sh"})
	} else {
		t.Log("no busybox on this machine: the init script runs under sh and dash only")
	}
	return out
}

// TestInitScript runs firmware/service/halite-agent.init against a real
// agent (start, status, reload, stop) in each shell, then rotates its log
// with the logrotate snippet, whose postrotate sends SIGHUP through the
// pid file: the agent writes a new file.
func TestInitScript(t *testing.T) {
	script, err := filepath.Abs(filepath.Join(serviceDir, "halite-agent.init"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shells(t) {
		t.Run(filepath.Base(sh[len(sh)-1]), func(t *testing.T) {
			if out, err := exec.Command(sh[0], append(sh[1:], "-n", script)...).CombinedOutput(); err != nil {
				t.Fatalf("%v -n: %v\n%s", sh, err, out)
			}
			root := t.TempDir()
			conf := filepath.Join(root, "etc")
			os.MkdirAll(conf, 0o755)
			os.WriteFile(filepath.Join(conf, "agent"), []byte("id: solo\nroot_dir: "+root+"\nmaster_type: disable\nfile_client: local\nlog_file: /log/agent\nlog_level_logfile: info\n"), 0o644)
			pidfile := filepath.Join(root, "run", "halite-agent.pid")
			logFile := filepath.Join(root, "log", "agent")
			run := func(action string) (string, int) {
				t.Helper()
				cmd := exec.Command(sh[0], append(sh[1:], script, action)...)
				cmd.Env = append(os.Environ(), "DAEMON="+filepath.Join(binDir, "halite-agent"), "CONFIG_DIR="+conf, "PIDFILE="+pidfile, "STOP_TIMEOUT=10")
				out, err := cmd.CombinedOutput()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatalf("%s: %v", action, err)
				}
				return string(out), code
			}
			t.Cleanup(func() { run("stop") })
			for _, step := range []struct {
				action, want string
				code         int
			}{
				{"status", "not running", 3},
				{"start", "started halite-agent", 0},
				{"start", "already running", 0},
				{"status", "is running", 0},
				{"reload", "reloaded", 0},
				{"status", "is running", 0},
			} {
				if out, code := run(step.action); code != step.code || !strings.Contains(out, step.want) {
					t.Fatalf("%s: got %d %q, want %d and %q", step.action, code, out, step.code, step.want)
				}
			}
			waitFor(t, 20*time.Second, "the SIGHUP in the agent's log", func() bool { return fileHas(logFile, "SIGHUP: log file reopened") })

			if lr, err := exec.LookPath("logrotate"); err != nil {
				t.Log("no logrotate on this machine: the snippet is not run")
			} else {
				b, err := os.ReadFile(filepath.Join(serviceDir, "halite.logrotate"))
				if err != nil {
					t.Fatal(err)
				}
				snippet := strings.NewReplacer("/var/log/halite/", filepath.Join(root, "log")+"/",
					`"/var/run/$s.pid"`, `"`+filepath.Join(root, "run")+`/$s.pid"`,
					"command -v systemctl", "false").Replace(string(b))
				lrConf := filepath.Join(root, "logrotate.conf")
				os.WriteFile(lrConf, []byte(snippet), 0o644)
				if out, err := exec.Command(lr, "-f", "-s", filepath.Join(root, "logrotate.state"), lrConf).CombinedOutput(); err != nil {
					t.Fatalf("logrotate -f: %v\n%s", err, out)
				}
				if !fileHas(logFile+".1", "starting") {
					t.Errorf("after logrotate: agent.1 got no start line, want the old log")
				}
				waitFor(t, 20*time.Second, "the agent's new log file", func() bool { return fileHas(logFile, "SIGHUP: log file reopened") })
			}

			for _, step := range []struct {
				action, want string
				code         int
			}{
				{"stop", "stopped halite-agent", 0},
				{"status", "not running", 3},
				{"stop", "not running", 0},
			} {
				if out, code := run(step.action); code != step.code || !strings.Contains(out, step.want) {
					t.Errorf("%s: got %d %q, want %d and %q", step.action, code, out, step.code, step.want)
				}
			}
		})
	}
}
