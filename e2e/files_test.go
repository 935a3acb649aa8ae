package e2e

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cpFileSize is the salt:// file of the cp.* tests: 5 MiB, 20 chunks.
const cpFileSize = 5 << 20

// cpRoots writes file_roots with cp.bin (random bytes), a template and a
// directory, and returns the master config and cp.bin's bytes.
func cpRoots(t *testing.T) (string, []byte) {
	t.Helper()
	data := make([]byte, cpFileSize)
	rand.Read(data)
	roots := writeFileRoots(t, map[string]string{
		"motd.j2":        "site {{ grains['site'] }} for {{ grains['id'] }} ({{ who }})\n",
		"conf/a.conf":    "a\n",
		"conf/sub/b.txt": "b\n",
	})
	dir := strings.TrimSpace(roots[strings.LastIndex(roots, "- ")+2:])
	if err := os.WriteFile(filepath.Join(dir, "cp.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return roots, data
}

// cpRet runs fun on one device through the master and returns its return.
func cpRet(t *testing.T, c *cluster, id string, args ...string) any {
	t.Helper()
	m, r := c.jsonOut("halite", append([]string{"-t", "60", id}, args...)...)
	v, ok := m[id]
	if !ok {
		t.Fatalf("%s %v: no return from %s: exit %d\n%s%s", id, args, id, r.code, r.stdout, r.stderr)
	}
	return v
}

// TestCPFilesThroughRelay: cp.get_file of a 5 MiB salt:// file, real
// processes: to a device connected to the master, and to two devices
// behind one relay, the second served from the relay's chunk cache (the
// relay fetched the file from the master once); cp.list_master,
// cp.get_template rendered with the device's grains, and a path that
// climbs out of file_roots refused.
func TestCPFilesThroughRelay(t *testing.T) {
	roots, data := cpRoots(t)
	c := newCluster(t, relayAllow+roots)
	port := c.masterAndRelay("r1")
	c.startAgent("d0", "grains:\n  site: hq\n")
	c.startBehind("d1", port, "grains:\n  site: harbour\n")
	c.startBehind("d2", port, "grains:\n  site: harbour\n")
	c.waitPending(3)
	c.acceptAll("r1", "d0", "d1", "d2")
	beat := chunkBeats(t, c, "r1")

	for _, id := range []string{"d0", "d1"} {
		dest := filepath.Join(c.root, id, "got", "cp.bin")
		if got := cpRet(t, c, id, "cp.get_file", "salt://cp.bin", dest, "makedirs=True"); got != dest {
			t.Fatalf("%s cp.get_file = %v, want %s", id, got, dest)
		}
		if b, err := os.ReadFile(dest); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s: %s holds %d bytes (%v), want the %d of salt://cp.bin", id, dest, len(b), err, len(data))
		}
	}
	chunks := int64(cpFileSize / (256 << 10))
	waitFor(t, 20*time.Second, "r1's heartbeat counting d1's chunks", func() bool { return beat().Misses+beat().Shared >= chunks })
	before := beat()
	dest := filepath.Join(c.root, "d2", "got", "cp.bin")
	if got := cpRet(t, c, "d2", "cp.get_file", "salt://cp.bin", dest, "makedirs=True"); got != dest {
		t.Fatalf("d2 cp.get_file = %v, want %s", got, dest)
	}
	if b, err := os.ReadFile(dest); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("d2: %s differs (%v)", dest, err)
	}
	var hb chunkBeat
	waitFor(t, 20*time.Second, "r1's heartbeat counting d2's chunks as hits", func() bool {
		hb = beat()
		return hb.Hits-before.Hits >= chunks
	})
	if hb.UpBytes != cpFileSize {
		t.Errorf("r1 fetched %d bytes of chunks from the master, want the file once (%d): %+v", hb.UpBytes, cpFileSize, hb)
	}

	if got, want := cpRet(t, c, "d1", "cp.list_master"), []any{"conf/a.conf", "conf/sub/b.txt", "cp.bin", "motd.j2"}; !equalJSON(got, want) {
		t.Errorf("cp.list_master = %v, want %v", got, want)
	}
	if got, want := cpRet(t, c, "d1", "cp.list_master_dirs"), []any{"conf", "conf/sub"}; !equalJSON(got, want) {
		t.Errorf("cp.list_master_dirs = %v, want %v", got, want)
	}
	motd := filepath.Join(c.root, "d1", "motd")
	if got := cpRet(t, c, "d1", "cp.get_template", "salt://motd.j2", motd, "who=ops"); got != motd {
		t.Fatalf("cp.get_template = %v, want %s", got, motd)
	}
	if b, _ := os.ReadFile(motd); string(b) != "site harbour for d1 (ops)\n" {
		t.Errorf("rendered motd = %q", b)
	}
	got := cpRet(t, c, "d1", "cp.get_dir", "salt://conf", filepath.Join(c.root, "d1", "dir"))
	if want := []any{filepath.Join(c.root, "d1", "dir", "conf", "a.conf"), filepath.Join(c.root, "d1", "dir", "conf", "sub", "b.txt")}; !equalJSON(got, want) {
		t.Errorf("cp.get_dir = %v, want %v", got, want)
	}
	for _, bad := range []string{"salt://../etc/passwd", "salt://conf/../../etc/passwd"} {
		if got := cpRet(t, c, "d1", "cp.get_file", bad, filepath.Join(c.root, "d1", "passwd")); !strings.Contains(toString(got), "refused") {
			t.Errorf("cp.get_file %s = %v, want refused", bad, got)
		}
	}
	if _, err := os.Stat(filepath.Join(c.root, "d1", "passwd")); !os.IsNotExist(err) {
		t.Errorf("a refused path was written (%v)", err)
	}
}

// TestCPTamperingRelay: a relay that alters the master's file answers
// (HALITE_TEST_TAMPER=file_answer, a real process): the device refuses
// them, and nothing is written.
func TestCPTamperingRelay(t *testing.T) {
	roots, _ := cpRoots(t)
	c := newCluster(t, relayAllow+roots)
	c.startMaster()
	port := freeUDPPort(t)
	c.startTampering("r1", "file_answer", relayConf(port))
	c.acceptAll("r1")
	c.startBehind("d1", port, "")
	c.waitPending(1)
	c.acceptAll("r1", "d1")

	dest := filepath.Join(c.root, "d1", "cp.bin")
	got := cpRet(t, c, "d1", "cp.get_file", "salt://cp.bin", dest)
	if !strings.Contains(toString(got), "refused the file server's answer") {
		t.Errorf("cp.get_file through a tampering relay = %v, want the answer refused", got)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("%s exists (%v)", dest, err)
	}
	if got := cpRet(t, c, "d1", "cp.list_master"); !strings.Contains(toString(got), "signature does not verify") {
		t.Errorf("cp.list_master through a tampering relay = %v, want a bad signature", got)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

func equalJSON(got any, want []any) bool {
	l, ok := got.([]any)
	if !ok || len(l) != len(want) {
		return false
	}
	for i := range l {
		if l[i] != want[i] {
			return false
		}
	}
	return true
}
