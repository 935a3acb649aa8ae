package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPillarOnMaster: the master compiles each device's pillar from
// pillar_roots (top file by grain, SLS with the device's grains) and a
// cmd_json ext_pillar; halite-run pillar.show_pillar and pillar.show_top
// show it, halite -I and I@ target by it, and a state's SLS reads it.
func TestPillarOnMaster(t *testing.T) {
	pdir := t.TempDir()
	for name, s := range map[string]string{
		"top.sls":    "base:\n  '*':\n    - common\n  'site:north':\n    - match: grain\n    - web\n",
		"common.sls": "greeting: hello {{ grains['site'] }}\n",
		"web.sls":    "role: web\nports: [80, 443]\n",
	} {
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	roots := writeFileRoots(t, map[string]string{
		"app.sls": "greet:\n  test.succeed_without_changes:\n    - name: {{ pillar['greeting'] }} as {{ pillar.get('role', 'none') }} from {{ pillar['ext'] }}\n",
	})
	c := newCluster(t, roots+fmt.Sprintf("pillar_roots:\n  base:\n    - %s\next_pillar:\n  - cmd_json: 'echo {\\\"ext\\\": \\\"%%s\\\"}'\n", pdir))
	c.startMaster()
	c.startAgent("cam1", "grains:\n  site: north\n")
	c.startAgent("cam2", "grains:\n  site: south\n")
	c.acceptAll("cam1", "cam2")
	c.waitUp("cam1", "cam2")

	out, r := c.jsonOut("halite-run", "pillar.show_pillar", "cam1")
	if r.code != 0 {
		t.Fatalf("pillar.show_pillar: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out["greeting"] != "hello north" || out["role"] != "web" || out["ext"] != "cam1" {
		t.Errorf("pillar.show_pillar cam1 = %v, want greeting 'hello north', role web, ext cam1", out)
	}
	out, r = c.jsonOut("halite-run", "pillar.show_top", "cam1")
	if base, _ := out["base"].(map[string]any); r.code != 0 || base["*"] == nil || base["site:north"] == nil {
		t.Errorf("pillar.show_top: exit %d, %v\n%s", r.code, out, r.stderr)
	}

	for _, args := range [][]string{{"-I", "role:web"}, {"-C", "I@role:web and I@ports:443"}, {"-J", "greeting:hello n.*"}} {
		out, r = c.jsonOut("halite", append(args[:2:2], "test.ping")...)
		if r.code != 0 || len(out) != 1 || out["cam1"] != true {
			t.Errorf("halite %v test.ping: exit %d, %v, want cam1 only\n%s", args, r.code, out, r.stderr)
		}
	}

	r = c.cli("halite", "*", "state.apply", "app")
	if r.code != 0 || !strings.Contains(r.stdout, "hello north as web from cam1") || !strings.Contains(r.stdout, "hello south as none from cam2") {
		t.Errorf("state.apply app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// pillar= on the command line is merged over the device's pillar.
	r = c.cli("halite", "cam2", "state.apply", "app", `pillar={"role": "cli"}`)
	if r.code != 0 || !strings.Contains(r.stdout, "hello south as cli from cam2") {
		t.Errorf("state.apply app pillar=: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

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
