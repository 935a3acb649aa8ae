package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestARMv7AgentUnderQEMU: the linux/arm v7 agent, as flashed on a camera,
// runs under qemu-arm, connects to a native master and answers test.ping.
// tools/ci/deps.sh (make test) installs qemu-user-static; without it this
// test fails rather than skips.
func TestARMv7AgentUnderQEMU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and emulates an ARM binary")
	}
	qemu, err := exec.LookPath("qemu-arm-static")
	if err != nil {
		if qemu, err = exec.LookPath("qemu-arm"); err != nil {
			t.Fatal("qemu-arm is not installed: run tools/ci/deps.sh (make test does)")
		}
	}
	bin := filepath.Join(t.TempDir(), "halite-agent-armv7")
	// Built as make cross builds it for armv7 (AGENT_GCFLAGS_SMALL,
	// AGENT_LDFLAGS_ARM: no inlining, 4 KiB segment alignment).
	build := exec.Command("go", "build", "-trimpath", "-gcflags=all=-l", "-ldflags", "-s -w -R 0x1000", "-o", bin, "../cmd/halite-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm", "GOARM=7")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cross-build: %v\n%s", err, out)
	}
	c := newCluster(t, "")
	c.startMaster()
	// Write the config through startAgent's path, then run the ARM binary.
	dir := c.agentDir("armcam")
	os.MkdirAll(dir, 0o755)
	conf := "id: armcam\nroot_dir: " + filepath.Join(c.root, "armcam") + "\nmaster: 127.0.0.1\nmaster_port: " +
		fmtInt(c.port) + "\nacceptance_wait_time: 1\nlog_file: ''\n"
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	c.agents["armcam"] = c.startRaw(qemu, bin, "-c", dir, "-l", "info")
	c.acceptAll("armcam")
	rets, r := c.jsonOut("halite", "armcam", "grains.item", "cpuarch")
	g, _ := rets["armcam"].(map[string]any)
	if r.code != 0 || g["cpuarch"] != "armv7l" && g["cpuarch"] != "arm" {
		t.Errorf("grains.item cpuarch on the ARM agent: exit %d, %v", r.code, rets)
	}
	if rets, r := c.jsonOut("halite", "armcam", "test.ping"); rets["armcam"] != true || r.code != 0 {
		t.Errorf("test.ping on the ARM agent: exit %d, %v", r.code, rets)
	}
}
