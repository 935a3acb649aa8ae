package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFileRoots writes a file_roots tree and returns the master config
// line that names it.
func writeFileRoots(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, s := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("file_roots:\n  base:\n    - %s\n", dir)
}

// TestStatesCompiledOnMaster: a top file and SLS as Salt's docs write them
// (salt/state.py HighState.top_matches, render_state) are compiled by the
// master per device, with each device's grains, and applied by real
// agents. Needs the agent's state.* functions (agent/state).
func TestStatesCompiledOnMaster(t *testing.T) {
	roots := writeFileRoots(t, map[string]string{
		"top.sls": "base:\n  '*':\n    - core\n  'site:north':\n    - match: grain\n    - north\n",
		"core.sls": `hello:
  test.succeed_without_changes:
    - name: hello from {{ grains['site'] }}
{% if grains['site'] == 'north' %}
north_only:
  cmd.run:
    - name: echo {{ salt['grains.get']('site') }}
{% endif %}
`,
		"north.sls":  "north_nop:\n  test.nop: []\n",
		"broken.sls": "a:\n  test.nop:\n    - x: {{ grains['site'] }\n",
		"runs.sls":   "a:\n  test.nop:\n    - x: {{ salt['cmd.run']('id') }}\n",
	})
	c := newCluster(t, roots)
	c.startMaster()
	c.startAgent("cam1", "grains:\n  site: north\n")
	c.startAgent("cam2", "grains:\n  site: south\n")
	c.acceptAll("cam1", "cam2")
	c.waitUp("cam1", "cam2")

	// What the master compiled, as the agents show it.
	out, r := c.jsonOut("halite", "*", "state.show_lowstate")
	if r.code != 0 {
		t.Fatalf("state.show_lowstate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ids := func(id string) []string {
		var got []string
		l, _ := out[id].([]any)
		for _, x := range l {
			m, _ := x.(map[string]any)
			got = append(got, fmt.Sprint(m["__id__"]))
		}
		return got
	}
	if got := strings.Join(ids("cam1"), ","); got != "hello,north_only,north_nop" {
		t.Errorf("cam1 lowstate ids: got %s, want hello,north_only,north_nop", got)
	}
	if got := strings.Join(ids("cam2"), ","); got != "hello" {
		t.Errorf("cam2 lowstate ids: got %s, want hello", got)
	}

	// Applied for real.
	r = c.cli("halite", "*", "state.apply")
	if r.code != 0 || !strings.Contains(r.stdout, "hello from north") || !strings.Contains(r.stdout, "hello from south") {
		t.Errorf("state.apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A Jinja error names the file and line; so does a salt[] call that
	// cannot run on the master.
	r = c.cli("halite", "cam1", "state.sls", "broken")
	if r.code == 0 || !strings.Contains(r.stdout, "broken.sls line 3") {
		t.Errorf("state.sls broken: exit %d, want non-zero and broken.sls line 3:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.cli("halite", "cam1", "state.sls", "runs")
	if r.code == 0 || !strings.Contains(r.stdout, "runs.sls line 3") || !strings.Contains(r.stdout, "salt['cmd.run'] cannot run at render time on the master") {
		t.Errorf("state.sls runs: exit %d, want the refusal with runs.sls line 3:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
