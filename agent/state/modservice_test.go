package state

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/state"
)

// svcRoot points the service providers at a test root and returns it.
func svcRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	old := [...]string{svcInitDir, svcRcRoot, svcSystemctl, svcSystemdBooted, svcOpenWrtRelease, svcUpdateRcD, svcRunlevel}
	t.Cleanup(func() {
		svcInitDir, svcRcRoot, svcSystemctl, svcSystemdBooted, svcOpenWrtRelease, svcUpdateRcD, svcRunlevel =
			old[0], old[1], old[2], old[3], old[4], old[5], old[6]
	})
	svcInitDir = filepath.Join(root, "etc/init.d")
	svcRcRoot = filepath.Join(root, "etc")
	svcSystemdBooted = filepath.Join(root, "run/systemd/system")
	svcOpenWrtRelease = filepath.Join(root, "etc/openwrt_release")
	svcUpdateRcD = ""                         // manage the rc?.d links ourselves
	svcRunlevel = filepath.Join(root, "nope") // runlevel 2
	for _, d := range []string{"etc/init.d", "etc/rc2.d", "etc/rc3.d", "etc/rc4.d", "etc/rc5.d", "run"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// svcScript is a SysV/BusyBox-style init script that runs a sleeping
// daemon, keeps its pid in a pid file, and logs its actions; with procd
// it also answers enable/disable/enabled/running as OpenWrt's rc.common.
const svcScript = `#!/bin/sh
PIDF=%[1]s/run/%[2]s.pid
LOG=%[1]s/run/%[2]s.log
EN=%[1]s/run/%[2]s.enabled
alive() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }
echo "$1" >> "$LOG"
case "$1" in
start) alive && exit 0; sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$PIDF" ;;
stop) alive && kill "$(cat "$PIDF")"; rm -f "$PIDF" ;;
restart) "$0" stop; "$0" start ;;
reload) alive || exit 1 ;;
status|running) alive ;;
enable) touch "$EN" ;;
disable) rm -f "$EN" ;;
enabled) [ -f "$EN" ] ;;
*) exit 3 ;;
esac
`

func svcInstall(t *testing.T, root, name string) {
	t.Helper()
	p := filepath.Join(root, "etc/init.d", name)
	if err := os.WriteFile(p, []byte(fmt.Sprintf(svcScript, root, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(p, "stop").Run() })
}

func svcPid(t *testing.T, root, name string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(root, "run", name+".pid"))
	return strings.TrimSpace(string(b))
}

func svcLog(root, name string) string {
	b, _ := os.ReadFile(filepath.Join(root, "run", name+".log"))
	return string(b)
}

// Cases from Salt's tests/pytests/unit/states/test_service.py (test_running,
// test_dead, test_enabled, test_disabled, test_mod_watch) and the comments
// of salt/states/service.py.
func TestServiceSysV(t *testing.T) {
	root := svcRoot(t)
	svcInstall(t, root, "camd")
	h := newSysHost(t)

	r := sysCall(t, h, "service.running", "camd", true, map[string]any{"enable": true})
	sysWant(t, "test=True", r, state.None, "Service camd is set to start")
	if svcPid(t, root, "camd") != "" || svcLog(root, "camd") != "status\n" {
		t.Fatalf("test=True did more than ask the status: log %q", svcLog(root, "camd"))
	}

	r = sysCall(t, h, "service.running", "camd", false, map[string]any{"enable": true})
	sysWant(t, "start", r, state.True, "Service camd has been enabled, and is running")
	if r.Changes["camd"] != true {
		t.Fatalf("changes %v, want camd: True", r.Changes)
	}
	pid := svcPid(t, root, "camd")
	if pid == "" {
		t.Fatal("not started")
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/rc2.d/S20camd")); err != nil {
		t.Fatalf("enable made no S link: %v", err)
	}

	r = sysCall(t, h, "service.running", "camd", false, map[string]any{"enable": true})
	sysWant(t, "second run", r, state.True, "The service camd is already running")
	if len(r.Changes) != 0 || svcPid(t, root, "camd") != pid {
		t.Fatalf("second run changed something: %v", r.Changes)
	}

	// mod_watch: restart, or reload with reload: True.
	r = sysWatch(t, h, "service.running", "camd", true, nil)
	sysWant(t, "watch test", r, state.None, "Service is set to be restarted")
	if svcPid(t, root, "camd") != pid {
		t.Fatal("mod_watch under test=True restarted")
	}
	r = sysWatch(t, h, "service.running", "camd", false, nil)
	sysWant(t, "watch restart", r, state.True, "Service restarted")
	if np := svcPid(t, root, "camd"); np == pid || np == "" {
		t.Fatalf("restart kept pid %s", pid)
	}
	r = sysWatch(t, h, "service.running", "camd", false, map[string]any{"reload": true})
	sysWant(t, "watch reload", r, state.True, "Service reloaded")
	if !strings.HasSuffix(svcLog(root, "camd"), "reload\n") {
		t.Fatalf("no reload in log %q", svcLog(root, "camd"))
	}

	r = sysCall(t, h, "service.dead", "camd", true, nil)
	sysWant(t, "dead test", r, state.None, "Service camd is set to be killed")
	r = sysCall(t, h, "service.dead", "camd", false, map[string]any{"enable": false})
	sysWant(t, "dead", r, state.True, "Service camd has been disabled, and is dead")
	if svcPid(t, root, "camd") != "" {
		t.Fatal("still running")
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/rc2.d/K20camd")); err != nil {
		t.Fatalf("disable left no K link: %v", err)
	}
	r = sysCall(t, h, "service.dead", "camd", false, nil)
	sysWant(t, "dead again", r, state.True, "The service camd is already dead")

	r = sysCall(t, h, "service.enabled", "camd", true, nil)
	sysWant(t, "enabled test", r, state.None, "Service camd set to be enabled")
	r = sysCall(t, h, "service.enabled", "camd", false, nil)
	sysWant(t, "enabled", r, state.True, "Service camd has been enabled, and is in the desired state")
	r = sysCall(t, h, "service.enabled", "camd", false, nil)
	sysWant(t, "enabled again", r, state.True, "Service camd is already enabled, and is in the desired state")
	r = sysCall(t, h, "service.disabled", "camd", false, nil)
	sysWant(t, "disabled", r, state.True, "Service camd has been disabled, and is in the desired state")

	r = sysCall(t, h, "service.running", "nosuch", false, nil)
	sysWant(t, "missing", r, state.False, "The named service nosuch is not available")
	r = sysCall(t, h, "service.running", "camd", false, map[string]any{"enabled": true})
	sysWant(t, "enabled typo", r, state.False, `Service camd uses non-existent option "enabled".  Perhaps "enable" option was intended?`)
	for _, bad := range []string{"-x", "../../bin/sh", "a b", "a\nb"} {
		r = sysCall(t, h, "service.running", bad, false, nil)
		if r.Result != state.False || !strings.HasPrefix(r.Comment, "Invalid service name") {
			t.Fatalf("hostile name %q: %v %q", bad, r.Result.Value(), r.Comment)
		}
	}
}

// OpenWrt's procd: enable/disable/enabled/running through the init script.
func TestServiceProcd(t *testing.T) {
	root := svcRoot(t)
	os.WriteFile(svcOpenWrtRelease, []byte("DISTRIB_ID='OpenWrt'\n"), 0o644)
	svcInstall(t, root, "uhttpd")
	h := newSysHost(t)
	r := sysCall(t, h, "service.running", "uhttpd", false, map[string]any{"enable": true})
	sysWant(t, "start", r, state.True, "Service uhttpd has been enabled, and is running")
	if _, err := os.Stat(filepath.Join(root, "run/uhttpd.enabled")); err != nil {
		t.Fatal("procd enable was not called")
	}
	if !strings.Contains(svcLog(root, "uhttpd"), "running\n") {
		t.Fatalf("status was not asked with running: %q", svcLog(root, "uhttpd"))
	}
	r = sysCall(t, h, "service.running", "uhttpd", false, map[string]any{"enable": true})
	sysWant(t, "again", r, state.True, "The service uhttpd is already running")
}

// systemd is not running in this container (systemctl is installed but
// the system was not booted with it), so a fake systemctl records the
// command lines the provider builds and keeps the units' state in files.
func TestServiceSystemdCommands(t *testing.T) {
	root := svcRoot(t)
	os.MkdirAll(svcSystemdBooted, 0o755)
	fake := filepath.Join(root, "systemctl")
	st := filepath.Join(root, "run")
	script := `#!/bin/sh
echo "$*" >> ` + st + `/systemctl.log
for a; do u=$a; done
case "$1" in
--no-block) shift ;;
esac
case "$1" in
show) [ "$u" = nginx.service ] && echo loaded || echo not-found ;;
is-active) [ -f ` + st + `/$u.active ] ;;
is-enabled) [ -f ` + st + `/$u.enabled ] ;;
start|restart) touch ` + st + `/$u.active ;;
stop) rm -f ` + st + `/$u.active ;;
enable) touch ` + st + `/$u.enabled ;;
disable) rm -f ` + st + `/$u.enabled ;;
*) echo "unknown $1" >&2; exit 1 ;;
esac
`
	os.WriteFile(fake, []byte(script), 0o755)
	svcSystemctl = fake
	h := newSysHost(t)
	r := sysCall(t, h, "service.running", "nginx", false, map[string]any{"enable": true, "no_block": true})
	sysWant(t, "start", r, state.True, "Service nginx has been enabled, and is running")
	r = sysCall(t, h, "service.running", "nginx", false, map[string]any{"enable": true})
	sysWant(t, "again", r, state.True, "The service nginx is already running")
	r = sysWatch(t, h, "service.running", "nginx", false, nil)
	sysWant(t, "restart", r, state.True, "Service restarted")
	b, _ := os.ReadFile(filepath.Join(st, "systemctl.log"))
	want := strings.Join([]string{
		"show --property=LoadState --value nginx.service",
		"is-active nginx.service", "is-enabled nginx.service",
		"--no-block start nginx.service",
		"is-active nginx.service", "is-enabled nginx.service",
		"show --property=LoadState --value nginx.service", "is-enabled nginx.service",
		"enable nginx.service", "is-enabled nginx.service",
	}, "\n")
	if got := string(b); !strings.HasPrefix(got, want+"\n") {
		t.Fatalf("systemctl calls:\n%s\nwant first:\n%s", got, want)
	}
	if !strings.HasSuffix(string(b), "restart nginx.service\n") {
		t.Fatalf("mod_watch did not restart: %s", b)
	}
}

func TestServiceInitDelayBounded(t *testing.T) {
	root := svcRoot(t)
	svcInstall(t, root, "d")
	h := newSysHost(t)
	start := time.Now()
	r := sysCall(t, h, "service.running", "d", false, map[string]any{"init_delay": 0.1})
	sysWant(t, "delay", r, state.True, "Started service d\nDelayed return for 0.1 seconds")
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("no delay")
	}
}

// optsSysHost is a sysHost with the agent's options.
type optsSysHost struct {
	*sysHost
	opts map[string]any
}

func (h optsSysHost) Opts() map[string]any { return h.opts }

// The agent's service_init_dir option (Halite's; Salt has none: its
// linux_service.py hard-codes /etc/init.d) points the service states at
// init.d scripts under another root, SysV style, whatever init the host
// booted with, and keeps their rc?.d links beside it.
func TestServiceInitDirOption(t *testing.T) {
	svcRoot(t) // the default paths: an empty test root
	os.MkdirAll(svcSystemdBooted, 0o755)
	root := t.TempDir()
	for _, d := range []string{"etc/init.d", "etc/rc2.d", "run"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	svcInstall(t, root, "camd")
	h := optsSysHost{newSysHost(t), map[string]any{"service_init_dir": filepath.Join(root, "etc/init.d")}}

	r := sysCall(t, h, "service.running", "camd", false, map[string]any{"enable": true})
	sysWant(t, "start", r, state.True, "Service camd has been enabled, and is running")
	if svcPid(t, root, "camd") == "" {
		t.Fatal("not started")
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/rc2.d/S20camd")); err != nil {
		t.Fatalf("enable made no S link beside the init.d: %v", err)
	}
	r = sysCall(t, newSysHost(t), "service.running", "camd", false, nil)
	sysWant(t, "without the option", r, state.False, "The named service camd is not available")
}

// watch through the engine: salt/state.py call_chunk calls the module's
// mod_watch with "sfun" the watching function (service.mod_watch and
// cmd.mod_watch in salt/states/service.py and cmd.py switch on it), so a
// cmd.wait runs and a running service restarts when what they watch
// changed.
func TestWatchThroughEngine(t *testing.T) {
	root := svcRoot(t)
	svcInstall(t, root, "camd")
	if err := exec.Command(filepath.Join(root, "etc/init.d/camd"), "start").Run(); err != nil {
		t.Fatal(err)
	}
	pid := svcPid(t, root, "camd")
	marker := filepath.Join(root, "waited")
	ret, err := Run(context.Background(), newSysHost(t), []state.Chunk{
		{"state": "test", "fun": "succeed_with_changes", "name": "changer", "__id__": "changer", "__sls__": "s", "order": 1},
		{"state": "cmd", "fun": "wait", "name": "touch " + marker, "__id__": "waiter", "__sls__": "s", "order": 2,
			"watch": []any{map[string]any{"test": "changer"}}},
		{"state": "service", "fun": "running", "name": "camd", "__id__": "camd", "__sls__": "s", "order": 3,
			"watch": []any{map[string]any{"test": "changer"}}},
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := ret["cmd_|-waiter_|-touch "+marker+"_|-wait"].(map[string]any)
	if w["result"] != true {
		t.Errorf("cmd.wait watching a change: %v", w)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("cmd.wait did not run its command: %v", err)
	}
	s, _ := ret["service_|-camd_|-camd_|-running"].(map[string]any)
	if s["result"] != true || s["comment"] != "Service restarted" {
		t.Errorf("service.running watching a change: %v", s)
	}
	if np := svcPid(t, root, "camd"); np == pid || np == "" {
		t.Errorf("camd not restarted: pid %s, was %s", np, pid)
	}
}
