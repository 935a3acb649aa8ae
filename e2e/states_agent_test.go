package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// state.single through the master, run by a real agent process: the chunk
// is built on the device from the job's arguments (salt/modules/state.py
// single), and the return is Salt's, keyed by the state's tag.
func TestStateSingle(t *testing.T) {
	c := newCluster(t, "auto_accept: True\n")
	c.startMaster()
	c.startAgent("cam1", "")
	c.waitUp("cam1")

	rets, r := c.jsonOut("halite", "cam1", "state.single", "test.succeed_with_changes", "name=x")
	ret, _ := rets["cam1"].(map[string]any)
	st, _ := ret["test_|-x_|-x_|-succeed_with_changes"].(map[string]any)
	if st["result"] != true || st["comment"] != "Success!" || st["__run_num__"] != float64(0) {
		t.Fatalf("state.single: exit %d, got %v\n%s", r.code, rets, r.stderr)
	}
	if ch, _ := st["changes"].(map[string]any); ch["testing"] == nil {
		t.Errorf("state.single: no changes in %v", st)
	}
	rets, _ = c.jsonOut("halite", "cam1", "state.single", "test.succeed_with_changes", "name=x", "test=True")
	ret, _ = rets["cam1"].(map[string]any)
	if st, _ := ret["test_|-x_|-x_|-succeed_with_changes"].(map[string]any); st["result"] != nil {
		t.Errorf("state.single test=True: got %v, want result None", rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "state.single", "nosuch.state", "name=x")
	if l, _ := rets["cam1"].([]any); len(l) != 1 || l[0] != "Specified state 'nosuch.state' was not found" {
		t.Errorf("unknown state function: got %v", rets)
	}
	// With no top file in the master's file_roots, the master's compile
	// says so as Salt's does (salt/state.py BaseHighState.call_highstate).
	rets, _ = c.jsonOut("halite", "cam1", "state.apply")
	if !strings.Contains(asString(rets["cam1"]), "No Top file or master_tops data matches found") {
		t.Errorf("state.apply with no top file: got %v", rets)
	}
}

// halite-call --local state.apply compiles the agent's own file_roots
// (plain YAML) and applies them, as salt-call --local does; Jinja is
// refused in the default build, naming the file.
func TestMasterlessStateApply(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	etc := filepath.Join(root, "etc")
	for _, d := range []string{srv, etc, filepath.Join(srv, "web")} {
		os.MkdirAll(d, 0o755)
	}
	marker := filepath.Join(root, "marker")
	files := map[string]string{
		"agent": "id: cam1\nroot_dir: " + root + "\nfile_client: local\nlog_file: ''\nfile_roots:\n  base:\n    - " + srv + "\n",
	}
	for name, text := range files {
		os.WriteFile(filepath.Join(etc, name), []byte(text), 0o644)
	}
	sls := map[string]string{
		"top.sls": "base:\n  'cam*':\n    - web\n",
		"web/init.sls": `include:
  - .notify
configured:
  test.succeed_with_changes:
    - require:
      - test: ready
ready:
  test.succeed_without_changes
only_when_changed:
  module.run:
    - file.touch:
      - ` + marker + `
    - onchanges:
      - test: configured
`,
		"web/notify.sls": "announce:\n  test.show_notification:\n    - text: applying web\n",
		"broken.sls":     "failing:\n  test.fail_without_changes\n",
		"templated.sls":  "a:\n  test.nop:\n    - name: {{ grains['id'] }}\n",
	}
	for name, text := range sls {
		os.WriteFile(filepath.Join(srv, name), []byte(text), 0o644)
	}

	r := runCmd(t, "halite-call", "-c", etc, "--local", "state.apply", "--out", "json")
	if r.code != 0 {
		t.Fatalf("state.apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tag := range []string{"test_|-configured_|-configured_|-succeed_with_changes", "test_|-ready_|-ready_|-succeed_without_changes",
		"module_|-only_when_changed_|-only_when_changed_|-run", "test_|-announce_|-announce_|-show_notification"} {
		if !strings.Contains(r.stdout, tag) {
			t.Errorf("state.apply: no %s in\n%s", tag, r.stdout)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the onchanges state did not run: %v", err)
	}
	os.Remove(marker)
	r = runCmd(t, "halite-call", "-c", etc, "--local", "state.apply", "test=True", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, "If we weren't testing, this would be successful with changes") {
		t.Errorf("state.apply test=True: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("test=True ran module.run")
	}

	r = runCmd(t, "halite-call", "-c", etc, "--local", "--retcode-passthrough", "state.sls", "broken", "--out", "json")
	if r.code != 2 || !strings.Contains(r.stdout, "Failure!") {
		t.Errorf("a failing state: exit %d, want 2 (EX_STATE_FAILURE)\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, "halite-call", "-c", etc, "--local", "state.sls", "templated", "--out", "json")
	if r.code == 0 || !strings.Contains(r.stdout, "templated.sls:3: Jinja needs the -tags reactor build of halite-call") {
		t.Errorf("Jinja in the default build: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, "halite-call", "-c", etc, "--local", "state.show_top", "--out", "json")
	if !strings.Contains(r.stdout, `"web"`) {
		t.Errorf("state.show_top: %s%s", r.stdout, r.stderr)
	}
}
