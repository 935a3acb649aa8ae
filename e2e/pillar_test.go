package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startDumping starts relay id from the tampering build with nothing
// altered, but every byte it reads from devices and from the master
// appended to dump (relay/tamper_hook.go, HALITE_TEST_DUMP).
func (c *cluster) startDumping(id, dump, extra string) *proc {
	c.t.Helper()
	c.writeAgentConfig(id, extra)
	p := c.startRawEnv([]string{"HALITE_TEST_DUMP=" + dump}, filepath.Join(binDir, "tamper", "halite-agent"), "-c", c.agentDir(id), "-l", "info")
	c.agents[id] = p
	return p
}

// TestPillarSecretThroughRelay: a secret given as pillar= to a state job
// reaches the devices behind a relay (their SLS writes it into a file),
// while the relay, real processes all, never has it: not in any byte it
// read from the master or the devices, not on its disk. The state jobs go
// sealed to each device's key (capability 13); pillar.items goes sealed
// too (PillarGet/PillarData through the relay).
func TestPillarSecretThroughRelay(t *testing.T) {
	rnd := make([]byte, 12)
	rand.Read(rnd)
	marker := "MARKER" + hex.EncodeToString(rnd)
	out := t.TempDir()
	roots := writeFileRoots(t, map[string]string{
		"sec.sls": "secret_file:\n  file.managed:\n    - name: " + out + "/{{ grains['id'] }}.txt\n    - contents: {{ pillar['secret'] }}\n",
	})
	c := newCluster(t, roots+relayAllow)
	c.startMaster()
	port := freeUDPPort(t)
	dump := filepath.Join(t.TempDir(), "relay.dump")
	c.startDumping("r1", dump, relayConf(port))
	c.acceptAll("r1")
	c.startBehind("d1", port, "")
	c.startBehind("d2", port, "")
	c.waitPending(2)
	c.acceptAll("r1", "d1", "d2")
	c.waitUp("r1", "d1", "d2")

	r := c.cli("halite", "-t", "20", "-L", "d1,d2", "state.sls", "sec", `pillar={"secret": "`+marker+`"}`)
	if r.code != 0 {
		t.Fatalf("state.sls: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, id := range []string{"d1", "d2"} {
		b, err := os.ReadFile(filepath.Join(out, id+".txt"))
		if err != nil || strings.TrimSpace(string(b)) != marker {
			t.Errorf("%s's file: %q, %v; want the marker", id, b, err)
		}
	}
	m, r := c.jsonOut("halite", "-t", "20", "-L", "d1,d2", "pillar.items")
	for _, id := range []string{"d1", "d2"} {
		if p, ok := m[id].(map[string]any); !ok || len(p) != 0 {
			t.Errorf("pillar.items on %s: %v, want {} (no pillar is configured)\n%s", id, m[id], r.stderr)
		}
	}
	// What the relay saw and kept.
	b, err := os.ReadFile(dump)
	if err != nil || len(b) == 0 {
		t.Fatalf("the relay's dump: %d bytes, %v", len(b), err)
	}
	if bytes.Contains(b, []byte(marker)) {
		t.Errorf("the relay read the marker in the clear (%d bytes dumped)", len(b))
	}
	if !bytes.Contains(b, []byte("__sealed__")) {
		t.Errorf("the relay forwarded no sealed state job (%d bytes dumped)", len(b))
	}
	c.stop(c.agents["r1"])
	filepath.WalkDir(filepath.Join(c.root, "r1"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			t.Errorf("the relay's disk holds the marker: %s", p)
		}
		return nil
	})
}
