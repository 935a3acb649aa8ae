package flash

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"github.com/halite-fleet/halite/internal/sshhost"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/halite-fleet/halite/firmware"
)

func TestParseProbe(t *testing.T) {
	out := "@uname\narmv7l\n@cpuinfo\nProcessor : ARMv7\n@endian\n   1\n\n@hostname\ncam7\n@uid\n0\n@dir\n/usr/bin\n@writable\nyes\n" +
		"@df\nFilesystem 1024-blocks Used Available Capacity Mounted on\n/dev/root 30000 20000 10000 67% /\n@init\nprocd\n@key\n@mac\nAA:BB:CC:00:11:22\n@idfile\ncam-7b\n\n@end\n"
	p, err := parseProbe(out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Uname != "armv7l" || p.Endian != firmware.Little || p.Hostname != "cam7" || !p.Writable || p.FreeKiB != 10000 || p.Init != "procd" || p.Key != nil || p.MAC != "aabbcc001122" || p.IDFile != "cam-7b" {
		t.Errorf("got %+v", p)
	}
	if _, err := parseProbe("@uname\nx86_64\n"); err == nil {
		t.Error("a probe cut short: no error")
	}
}

func TestParseDF(t *testing.T) {
	tests := map[string]int64{
		"Filesystem 1K-blocks Used Available Use% Mounted on\ntmpfs 2048 0 2048 0% /x\n": 2048,
		// BusyBox without -P wraps a long device name.
		"Filesystem           1K-blocks      Used Available Use% Mounted on\n/dev/mapper/very-long-name\n                       1000       10       990   1% /\n": 990,
		"":           -1,
		"garbage\nx": -1,
	}
	for in, want := range tests {
		if got := parseDF(in); got != want {
			t.Errorf("parseDF(%q): got %d, want %d", in, got, want)
		}
	}
}

func TestParseInventory(t *testing.T) {
	in := "# site 1\n10.0.0.5 id=cam5 arch=armv7\n10.0.0.6:2222 user=admin  # gateway\n\n"
	got, err := ParseInventory(strings.NewReader(in), "inv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (Target{Addr: "10.0.0.5", ID: "cam5", Arch: "armv7"}) || got[1] != (Target{Addr: "10.0.0.6:2222", User: "admin"}) {
		t.Errorf("got %+v", got)
	}
	for in, want := range map[string]string{
		"h1\nh2 id=a/b\n": "inv:2:",
		"h1 arch=sparc\n": "inv:1: unknown architecture",
		"h1 color=red\n":  "inv:1: unknown key",
		"h1\nh1\n":        "inv:2: h1 is listed twice (first on line 1)",
		"h1 id\n":         "inv:1: \"id\": want key=value",
	} {
		if _, err := ParseInventory(strings.NewReader(in), "inv"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseInventory(%q): got %v, want %q", in, err, want)
		}
	}
}

func TestStateFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, err := openState(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.record(Result{Addr: "h1", ID: "a"}); err != nil {
		t.Fatal(err)
	}
	s.close()
	s, err = openState(p)
	if err != nil {
		t.Fatal(err)
	}
	if !s.done("h1") || s.done("h2") {
		t.Errorf("done: h1 %v h2 %v", s.done("h1"), s.done("h2"))
	}
	s.close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("{not json\n")
	f.Close()
	if _, err := openState(p); err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("corrupt state file: got %v, want an error naming %s:2", err, p)
	}
}

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestHostKeys: first sight is refused, or recorded with acceptNew; the
// recorded key passes; another key for the host is refused as changed,
// even with acceptNew.
func TestHostKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "known_hosts")
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2222}
	k1, k2 := newHostKey(t), newHostKey(t)
	strict, err := sshhost.New(file, false)
	if err != nil {
		t.Fatal(err)
	}
	var he *sshhost.Error
	if err := strict.Callback("127.0.0.1:2222", addr, k1); !errors.As(err, &he) || he.Changed {
		t.Fatalf("unknown host without acceptNew: got %v", err)
	}
	loose, _ := sshhost.New(file, true)
	if err := loose.Callback("127.0.0.1:2222", addr, k1); err != nil {
		t.Fatalf("first sight with acceptNew: %v", err)
	}
	if err := strict.Callback("127.0.0.1:2222", addr, k1); err != nil {
		t.Errorf("recorded key: %v", err)
	}
	for i, h := range []*sshhost.Checker{strict, loose} {
		if err := h.Callback("127.0.0.1:2222", addr, k2); !errors.As(err, &he) || !he.Changed || !strings.Contains(err.Error(), "HOST KEY CHANGED") {
			t.Errorf("changed key (acceptNew %v): got %v", i == 1, err)
		}
	}
	if got := strict.Algorithms("127.0.0.1:2222"); len(got) != 1 || got[0] != ssh.KeyAlgoED25519 {
		t.Errorf("algorithms of a recorded ed25519 host: %v", got)
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Errorf("known_hosts has %d lines, want 1:\n%s", n, b)
	}
}
