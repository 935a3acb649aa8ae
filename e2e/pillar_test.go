package e2e

import (
	"fmt"
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
