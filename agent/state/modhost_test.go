package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// Cases from Salt's tests/pytests/unit/states/test_host.py (test_present,
// test_absent) over salt/modules/hosts.py's file layout.
func TestHost(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	old := hostsFile
	hostsFile = p
	t.Cleanup(func() { hostsFile = old })
	orig := "# static\n127.0.0.1 localhost\n10.0.0.9 cam9 # lab\n"
	os.WriteFile(p, []byte(orig), 0o644)
	read := func() string { b, _ := os.ReadFile(p); return string(b) }
	h := newSysHost(t)

	r := sysCall(t, h, "host.present", "nvr", true, map[string]any{"ip": "10.0.0.5"})
	sysWant(t, "test", r, state.None, "Host nvr (10.0.0.5) would be added")
	if read() != orig {
		t.Fatal("test=True wrote the file")
	}
	r = sysCall(t, h, "host.present", "nvr", false, map[string]any{"ip": []any{"10.0.0.5", "127.0.0.1"}})
	sysWant(t, "add", r, state.True, "Added host nvr (10.0.0.5)\nAdded host nvr (127.0.0.1)")
	want := "# static\n127.0.0.1\t\tlocalhost nvr\n10.0.0.9\t\tcam9\t\t# lab\n10.0.0.5\t\tnvr\n"
	if read() != want {
		t.Fatalf("hosts:\n%q\nwant\n%q", read(), want)
	}
	added := r.Changes["added"].(map[string]any)
	if len(added) != 2 {
		t.Fatalf("changes %v", r.Changes)
	}
	r = sysCall(t, h, "host.present", "nvr", false, map[string]any{"ip": []any{"10.0.0.5", "127.0.0.1"}})
	sysWant(t, "again", r, state.True, "Host nvr (10.0.0.5) already present\nHost nvr (127.0.0.1) already present")
	if len(r.Changes) != 0 {
		t.Fatalf("second run changes %v", r.Changes)
	}
	r = sysCall(t, h, "host.present", "nvr", false, map[string]any{"ip": "10.0.0.5", "clean": true})
	sysWant(t, "clean", r, state.True, "Host nvr (10.0.0.5) already present\nRemoved host nvr (127.0.0.1)")
	r = sysCall(t, h, "host.absent", "nvr", true, map[string]any{"ip": "10.0.0.5"})
	sysWant(t, "absent test", r, state.None, "Host nvr (10.0.0.5) needs to be removed")
	r = sysCall(t, h, "host.absent", "nvr", false, map[string]any{"ip": "10.0.0.5"})
	sysWant(t, "absent", r, state.True, "Removed host nvr (10.0.0.5)")
	if read() != "# static\n127.0.0.1\t\tlocalhost\n10.0.0.9\t\tcam9\t\t# lab\n" {
		t.Fatalf("after absent %q", read())
	}
	r = sysCall(t, h, "host.absent", "nvr", false, map[string]any{"ip": "10.0.0.5"})
	sysWant(t, "absent again", r, state.True, "Host nvr (10.0.0.5) already absent")
	for _, bad := range []map[string]any{{"ip": "10.0.0.1\n6.6.6.6 evil"}, {"ip": "not-an-ip"}} {
		r = sysCall(t, h, "host.present", "x", false, bad)
		sysWant(t, "bad ip", r, state.False, "")
	}
	r = sysCall(t, h, "host.present", "a b", false, map[string]any{"ip": "10.0.0.1"})
	sysWant(t, "bad name", r, state.False, "")
}
