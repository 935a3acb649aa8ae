package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/halite-fleet/halite/internal/gotrim"
)

var armv7 struct {
	once      sync.Once
	qemu, bin string
	err       error
}

// armv7Agent returns qemu-arm and the linux/arm v7 agent, as flashed on a
// camera, built once for the run. tools/ci/deps.sh (make test) installs
// qemu-user-static; without it the tests fail rather than skip. The size
// is not judged here (the Makefile reports it).
func armv7Agent(t *testing.T) (qemu, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and emulates an ARM binary")
	}
	armv7.once.Do(func() {
		var err error
		if armv7.qemu, err = exec.LookPath("qemu-arm-static"); err != nil {
			if armv7.qemu, err = exec.LookPath("qemu-arm"); err != nil {
				armv7.err = fmt.Errorf("qemu-arm is not installed: run tools/ci/deps.sh (make test does)")
				return
			}
		}
		armv7.bin = filepath.Join(binDir, "armv7", "halite-agent")
		// Built as make cross builds it for armv7 (AGENT_GCFLAGS_SMALL,
		// the gotrim overlay, AGENT_LDFLAGS_ARM: no inlining, size-only
		// compiler settings, the trimmed standard library, 4 KiB segment
		// alignment).
		overlay, err := deviceOverlay()
		if err != nil {
			armv7.err = err
			return
		}
		build := exec.Command("go", "build", "-trimpath", "-gcflags=all=-l -d=maxshapelen=64,variablemakethreshold=0", "-overlay="+overlay, "-ldflags", "-s -w -R 0x1000", "-o", armv7.bin, "../cmd/halite-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm", "GOARM=7")
		if out, err := build.CombinedOutput(); err != nil {
			armv7.err = fmt.Errorf("cross-build: %v\n%s", err, out)
		}
	})
	if armv7.err != nil {
		t.Fatal(armv7.err)
	}
	return armv7.qemu, armv7.bin
}

// deviceOverlay writes, once per run, the gotrim overlay that every
// 32-bit ARM and MIPS agent is built with (the Makefile's AGENT_OVERLAY)
// and returns its path.
func deviceOverlay() (string, error) {
	gotrimOverlay.once.Do(func() {
		gotrimOverlay.path = filepath.Join(binDir, "gotrim-overlay.json")
		gotrimOverlay.err = gotrim.WriteForModule(context.Background(), "go", "..", nil, gotrimOverlay.path)
	})
	return gotrimOverlay.path, gotrimOverlay.err
}

var gotrimOverlay struct {
	once sync.Once
	path string
	err  error
}

// startARMv7 starts the ARM agent id under qemu-arm against c's master
// and accepts its key.
func (c *cluster) startARMv7(id, extra string) {
	c.t.Helper()
	qemu, bin := armv7Agent(c.t)
	dir := c.agentDir(id)
	os.MkdirAll(dir, 0o755)
	conf := "id: " + id + "\nroot_dir: " + filepath.Join(c.root, id) + "\nmaster: 127.0.0.1\nmaster_port: " +
		fmtInt(c.port) + "\nacceptance_wait_time: 1\nlog_file: ''\n" + extra
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	c.agents[id] = c.startRaw(qemu, bin, "-c", dir, "-l", "info")
	c.acceptAll(id)
}

// TestARMv7AgentUnderQEMU: the linux/arm v7 agent runs under qemu-arm,
// connects to a native master and answers test.ping.
func TestARMv7AgentUnderQEMU(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startARMv7("armcam", "")
	rets, r := c.jsonOut("halite", "armcam", "grains.item", "cpuarch")
	g, _ := rets["armcam"].(map[string]any)
	if r.code != 0 || g["cpuarch"] != "armv7l" && g["cpuarch"] != "arm" {
		t.Errorf("grains.item cpuarch on the ARM agent: exit %d, %v", r.code, rets)
	}
	if rets, r := c.jsonOut("halite", "armcam", "test.ping"); rets["armcam"] != true || r.code != 0 {
		t.Errorf("test.ping on the ARM agent: exit %d, %v", r.code, rets)
	}
}

// armInitScript is a SysV/BusyBox-style init script: a sleeping daemon
// with a pid file, its actions logged.
const armInitScript = `#!/bin/sh
PIDF=%[1]s/run/%[2]s.pid
alive() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }
echo "$1" >> %[1]s/run/%[2]s.log
case "$1" in
start) alive && exit 0; sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$PIDF" ;;
stop) alive && kill "$(cat "$PIDF")"; rm -f "$PIDF" ;;
restart) "$0" stop; "$0" start ;;
status) alive ;;
*) exit 3 ;;
esac
`

// TestARMv7AgentAppliesHighstate: the ARM agent under qemu-arm applies a
// highstate the master compiled for it (top.sls and an SLS as Salt's
// documentation writes them): file.managed from a salt:// source and from
// contents, cmd.run with creates and unless (salt/states/cmd.py
// mod_run_check), service.running of an init.d script under a test root
// (the agent's service_init_dir) watching a file. test=True changes
// nothing; a second run changes nothing either.
func TestARMv7AgentAppliesHighstate(t *testing.T) {
	out := t.TempDir()
	for _, d := range []string{"etc/init.d", "run"} {
		os.MkdirAll(filepath.Join(out, d), 0o755)
	}
	script := filepath.Join(out, "etc/init.d/camd")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(armInitScript, out, "camd")), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command(script, "stop").Run() })
	roots := writeFileRoots(t, map[string]string{
		"top.sls":    "base:\n  'armcam':\n    - cam\n",
		"files/motd": "Welcome to a Halite camera\n",
		"cam.sls": `motd:
  file.managed:
    - name: ` + out + `/etc/motd
    - source: salt://files/motd
    - mode: '0644'
settings:
  file.managed:
    - name: ` + out + `/etc/cam.conf
    - contents: |
        id={{ grains['id'] }}
        arch={{ grains['cpuarch'] }}
init_marker:
  cmd.run:
    - name: touch ` + out + `/initialised
    - creates: ` + out + `/initialised
guarded:
  cmd.run:
    - name: echo ran >> ` + out + `/guarded.log
    - unless: test -f ` + out + `/skip-guarded
camd:
  service.running:
    - watch:
      - file: settings
`,
	})
	c := newCluster(t, roots)
	c.startMaster()
	c.startARMv7("armcam", "service_init_dir: "+filepath.Join(out, "etc/init.d")+"\n")

	apply := func(args ...string) map[string]any {
		t.Helper()
		rets, r := c.jsonOut("halite", append([]string{"armcam", "state.apply"}, args...)...)
		ret, _ := rets["armcam"].(map[string]any)
		if r.code != 0 || len(ret) != 5 {
			t.Fatalf("state.apply %v: exit %d, %d states\n%s%s", args, r.code, len(ret), r.stdout, r.stderr)
		}
		return ret
	}
	changed := func(ret map[string]any) []string {
		var ids []string
		for _, v := range ret {
			st, _ := v.(map[string]any)
			if ch, _ := st["changes"].(map[string]any); len(ch) > 0 {
				ids = append(ids, fmt.Sprint(st["__id__"]))
			}
		}
		return ids
	}
	pid := func() string {
		b, _ := os.ReadFile(filepath.Join(out, "run/camd.pid"))
		return strings.TrimSpace(string(b))
	}

	// test=True: results None where something would change, nothing done.
	ret := apply("test=True")
	for _, p := range []string{"etc/motd", "etc/cam.conf", "initialised", "guarded.log"} {
		if _, err := os.Stat(filepath.Join(out, p)); err == nil {
			t.Errorf("test=True made %s", p)
		}
	}
	if pid() != "" {
		t.Errorf("test=True started the service")
	}
	for tag, v := range ret {
		if st, _ := v.(map[string]any); st["result"] != nil {
			t.Errorf("test=True: %s result %v, want None", tag, st["result"])
		}
	}

	// Applied.
	ret = apply()
	for tag, v := range ret {
		if st, _ := v.(map[string]any); st["result"] != true {
			t.Errorf("%s: result %v, comment %v", tag, st["result"], st["comment"])
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "etc/motd")); string(b) != "Welcome to a Halite camera\n" {
		t.Errorf("motd from salt://files/motd: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "etc/cam.conf")); !strings.HasPrefix(string(b), "id=armcam\narch=arm") {
		t.Errorf("cam.conf rendered with the ARM agent's grains: %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "initialised")); err != nil {
		t.Errorf("cmd.run with creates did not run: %v", err)
	}
	first := pid()
	if first == "" {
		t.Fatalf("service.running did not start camd")
	}

	// Again, with unless now true: nothing changes, the service keeps
	// its process.
	os.WriteFile(filepath.Join(out, "skip-guarded"), nil, 0o644)
	ret = apply()
	if ids := changed(ret); len(ids) != 0 {
		t.Errorf("second run changed %v", ids)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "guarded.log")); string(b) != "ran\n" {
		t.Errorf("guarded.log %q: unless did not keep the command from running again", b)
	}
	if pid() != first {
		t.Errorf("the second run restarted camd (pid %s, was %s)", pid(), first)
	}
}
