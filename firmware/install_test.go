package firmware

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallScriptInitSystems runs install.sh (under BusyBox's sh when
// installed, else sh) in fake roots that look like a systemd host, an
// OpenWrt (procd) device and a device with no init system: each gets its
// init script with the paths of the root and --bin-dir. --no-start: the
// services are not started (the e2e tests start a real agent with the
// SysV script). The "agent" here is a copy of /bin/true, which answers
// --version.
func TestInstallScriptInitSystems(t *testing.T) {
	shell := []string{"sh"}
	if bb, err := exec.LookPath("busybox"); err == nil {
		shell = []string{bb, "sh"}
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1)")
	}
	agent, _ := os.ReadFile(truePath)
	bin := filepath.Join(t.TempDir(), "halite-agent")
	os.WriteFile(bin, agent, 0o755)
	tests := []struct {
		name, init string
		mkdirs     []string
		file       string // the init script installed, under the root
		want       []string
		oldCall    bool // a halite-call binary of a two-file install is there
	}{
		{name: "systemd", init: "systemd", mkdirs: []string{"run/systemd/system"}, file: "etc/systemd/system/halite-agent.service",
			want: []string{"ExecStart=ROOT/opt/halite/halite-agent -c ROOT/etc/halite\n"}},
		{name: "openwrt", init: "procd", mkdirs: []string{"etc/init.d", "sbin"}, file: "etc/init.d/halite-agent",
			want: []string{"USE_PROCD=1", "PROG=ROOT/opt/halite/halite-agent\n", "CONFIG_DIR=ROOT/etc/halite\n"}},
		{name: "sysv", init: "sysv", mkdirs: []string{"etc/init.d"}, file: "etc/init.d/halite-agent",
			want: []string{"DAEMON=${DAEMON:-ROOT/opt/halite/halite-agent}", "PIDFILE=${PIDFILE:-ROOT/var/run/halite-agent.pid}", "[ -r ROOT/etc/default/halite-agent ]"}},
		{name: "bare", init: "none", oldCall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "bundle")
			b := &Bundle{Arch: Arch{Name: "amd64"}, Profile: Profile{Master: Endpoint{"m", 4506}, MasterFinger: "ff"}, Agent: bin}
			if err := b.WriteDir(dir); err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			for _, d := range tt.mkdirs {
				os.MkdirAll(filepath.Join(root, d), 0o755)
			}
			if tt.oldCall {
				os.MkdirAll(filepath.Join(root, "opt", "halite"), 0o755)
				os.WriteFile(filepath.Join(root, "opt", "halite", "halite-call"), agent, 0o755)
			}
			if tt.init == "procd" {
				os.WriteFile(filepath.Join(root, "etc", "rc.common"), []byte("#!/bin/sh\n"), 0o755)
			}
			cmd := exec.Command(shell[0], append(shell[1:], filepath.Join(dir, "install.sh"), "--root", root, "--bin-dir", "/opt/halite", "--id", "cam-1", "--no-start", "--force-arch")...)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "HALITE-INSTALL ok id=cam-1 arch=amd64 init="+tt.init) {
				t.Fatalf("install.sh: %v\n%s", err, out)
			}
			if fi, err := os.Stat(filepath.Join(root, "opt", "halite", "halite-agent")); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("agent binary: %v %v", fi, err)
			}
			// One binary on the device: halite-call is a symlink to the
			// agent beside it (halite-agent is multi-call), replacing
			// the file a two-binary install had.
			if l, err := os.Readlink(filepath.Join(root, "opt", "halite", "halite-call")); err != nil || l != "halite-agent" {
				t.Errorf("halite-call: readlink %q, %v; want a symlink to halite-agent", l, err)
			}
			conf, _ := os.ReadFile(filepath.Join(root, "etc", "halite", "agent"))
			if !strings.Contains(string(conf), "master_finger: \"ff\"") || !strings.Contains(string(conf), "id: cam-1\n") {
				t.Errorf("config:\n%s", conf)
			}
			if tt.file == "" {
				return
			}
			got, err := os.ReadFile(filepath.Join(root, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "ROOT", root); !strings.Contains(string(got), w) {
					t.Errorf("%s lacks %q:\n%s", tt.file, w, got)
				}
			}
		})
	}
}

// TestInstallScriptRefusals: a bundle for another architecture, an id
// that the master would refuse, and an unwritable install directory stop
// install.sh with a kind and what to do.
func TestInstallScriptRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bundle")
	b := &Bundle{Arch: Arch{Name: "mipsle"}, Profile: Profile{Master: Endpoint{"m", 4506}}, Agent: "/bin/true"}
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	run := func(args ...string) string {
		out, err := exec.Command("sh", append([]string{filepath.Join(dir, "install.sh"), "--root", root, "--no-start"}, args...)...).CombinedOutput()
		if err == nil {
			t.Errorf("install.sh %v: no error\n%s", args, out)
		}
		return string(out)
	}
	if out := run("--id", "x"); !strings.Contains(out, "HALITE-INSTALL error=arch") || !strings.Contains(out, "--arch") {
		t.Errorf("wrong arch:\n%s", out)
	}
	if out := run("--force-arch", "--id", "a/b"); !strings.Contains(out, "HALITE-INSTALL error=id") {
		t.Errorf("bad id:\n%s", out)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(root, "ro")
		os.MkdirAll(ro, 0o555)
		if out := run("--force-arch", "--id", "x", "--bin-dir", "/ro"); !strings.Contains(out, "HALITE-INSTALL error=readonly") {
			t.Errorf("read-only:\n%s", out)
		}
	}
}
