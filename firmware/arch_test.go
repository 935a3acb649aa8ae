package firmware

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestDetectArch(t *testing.T) {
	tests := []struct {
		uname, cpuinfo string
		endian         Endian
		want, err      string
	}{
		{uname: "x86_64", want: "amd64"},
		{uname: "aarch64", want: "arm64"},
		{uname: "armv7l", want: "armv7"},
		{uname: "armv8l", want: "armv7"},
		{uname: "armv6l", want: "armv6"},
		{uname: "arm", cpuinfo: "processor\t: 0\nmodel name\t: ARMv6-compatible processor rev 7 (v6l)\n", want: "armv6"},
		{uname: "arm", cpuinfo: "Processor\t: ARMv7 Processor rev 5 (v7l)\nCPU architecture: 7\n", want: "armv7"},
		{uname: "armv5tejl", cpuinfo: "Processor\t: ARM926EJ-S rev 5 (v5l)\nCPU architecture: 5TEJ\n", err: "no ARM v6 or later"},
		{uname: "mips", endian: Little, want: "mipsle"},
		{uname: "mips", endian: Big, err: "big-endian MIPS"},
		{uname: "mips", err: "unknown byte order"},
		{uname: "mipsel", want: "mipsle"},
		{uname: "riscv64", err: "no agent build for \"riscv64\""},
		{uname: "", err: "printed nothing"},
	}
	for _, tt := range tests {
		a, err := DetectArch(tt.uname, tt.cpuinfo, tt.endian)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("DetectArch(%q): got %v, %v; want error with %q", tt.uname, a.Name, err, tt.err)
		case tt.err == "" && (err != nil || a.Name != tt.want):
			t.Errorf("DetectArch(%q, %q): got %q, %v; want %q", tt.uname, tt.cpuinfo, a.Name, err, tt.want)
		case err != nil && !strings.HasPrefix(err.Error(), "unknown arch"):
			t.Errorf("DetectArch(%q): error %q does not start with \"unknown arch\"", tt.uname, err)
		}
	}
}

func TestParseEndian(t *testing.T) {
	for in, want := range map[string]Endian{"   1\n": Little, "2": Big, "001": Little, "": EndianUnknown, "x": EndianUnknown} {
		if got := ParseEndian(in); got != want {
			t.Errorf("ParseEndian(%q): got %v, want %v", in, got, want)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		in   string
		want Endpoint
		err  bool
	}{
		{in: "master.example", want: Endpoint{"master.example", 4506}},
		{in: "10.0.0.1:4600", want: Endpoint{"10.0.0.1", 4600}},
		{in: "[fd00::1]:4506", want: Endpoint{"fd00::1", 4506}},
		{in: "fd00::1", want: Endpoint{"fd00::1", 4506}},
		{in: "host:0", err: true},
		{in: "host:x", err: true},
		{in: "ho st", err: true},
		{in: "a\"b", err: true},
		{in: "", err: true},
	}
	for _, tt := range tests {
		got, err := ParseEndpoint(tt.in, DefaultMasterPort)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("ParseEndpoint(%q): got %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestCheckIDFrom(t *testing.T) {
	for _, ok := range []string{"hostname", "mac", "file:/etc/halite/minion_id"} {
		if err := CheckIDFrom(ok); err != nil {
			t.Errorf("CheckIDFrom(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "serial", "file:relative", "file:/a b", "file:/x'$(reboot)'"} {
		if err := CheckIDFrom(bad); err == nil {
			t.Errorf("CheckIDFrom(%q): no error", bad)
		}
	}
}

// TestAgentConfig: the master's fingerprint is pinned, and a device behind
// a relay connects to the relay.
func TestAgentConfig(t *testing.T) {
	p := Profile{Master: Endpoint{"m.example", 4506}, MasterFinger: "ab:cd"}
	got := string(p.AgentConfig("armv7"))
	for _, want := range []string{"master: \"m.example\"\n", "master_port: 4506\n", "master_finger: \"ab:cd\"\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	p.Relay = &Endpoint{"10.1.1.1", 4510}
	p.RelayFinger = "ef"
	got = string(p.AgentConfig("armv7"))
	for _, want := range []string{"master: \"10.1.1.1\"\n", "master_port: 4510\n", "master_finger: \"ab:cd\"\n", "relay_finger: \"ef\"\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("relay config lacks %q:\n%s", want, got)
		}
	}
}

// TestSourceChecksELF: a given agent binary must be a Linux executable of
// the architecture asked, so a camera is never sent an amd64 file.
func TestSourceChecksELF(t *testing.T) {
	self, err := os.Executable() // this test binary: linux/amd64 here
	if err != nil {
		t.Skip(err)
	}
	native := map[string]string{"amd64": "amd64", "arm64": "arm64"}[runtime.GOARCH]
	if native == "" {
		t.Skip("runs on amd64 or arm64")
	}
	ctx := context.Background()
	if _, err := (Source{Binary: self}).AgentBinary(ctx, mustArch(t, native)); err != nil {
		t.Errorf("the native binary for %s: %v", native, err)
	}
	if _, err := (Source{Binary: self}).AgentBinary(ctx, mustArch(t, "armv7")); err == nil || !strings.Contains(err.Error(), "not armv7") {
		t.Errorf("a %s binary given for armv7: got %v", native, err)
	}
	dist := t.TempDir()
	if _, err := (Source{Dist: dist}).AgentBinary(ctx, mustArch(t, "mipsle")); err == nil || !strings.Contains(err.Error(), "make cross") {
		t.Errorf("a dist without mipsle: got %v", err)
	}
	notELF := filepath.Join(dist, "x")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if _, err := (Source{Binary: notELF}).AgentBinary(ctx, mustArch(t, native)); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("a script as the agent: got %v", err)
	}
}

func mustArch(t *testing.T, name string) Arch {
	t.Helper()
	a, err := LookupArch(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
