package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// orchRoots is a file_roots tree with an orchestration in Salt's form
// (doc/topics/orchestrate/orchestrate_runner.rst): a salt.function step,
// a salt.state step that requires it and applies web.sls on the cameras
// with the orchestration's pillar passed on, a salt.function step that
// fails with failhard, and a step after it that must never run.
func orchRoots(t *testing.T) (conf, root string) {
	t.Helper()
	root = t.TempDir()
	conf = writeFileRoots(t, map[string]string{
		"web.sls": `web_marker:
  file.managed:
    - name: {{ pillar['dir'] }}/{{ grains['id'] }}.web
    - contents: deployed by orchestrate
`,
		"orch/deploy.sls": `prepare:
  salt.function:
    - name: cmd.run
    - tgt: 'cam*'
    - arg:
      - echo prepared

apply_web:
  salt.state:
    - tgt: 'cam*'
    - sls: web
    - pillar:
        dir: {{ pillar['dir'] }}
    - require:
      - salt: prepare

broken:
  salt.function:
    - name: cmd.retcode
    - tgt: cam1
    - arg:
      - exit 3
    - failhard: True
    - require:
      - salt: apply_web

never:
  salt.function:
    - name: test.ping
    - tgt: '*'
`,
		"orch/react.sls": `react_web:
  salt.state:
    - tgt: 'cam*'
    - sls: web
    - pillar:
        dir: {{ pillar['dir'] }}
`,
	})
	return conf, root
}

// TestOrchestrate: halite-run state.orchestrate on a real master with real
// agents (salt/runners/state.py orchestrate, salt/states/saltmod.py):
// requisites, a failing step with failhard, the highstate outputter,
// --out json in Salt's shape, the exit status, and test=True.
func TestOrchestrate(t *testing.T) {
	conf, _ := orchRoots(t)
	c := newCluster(t, conf+"id: orchmaster\n")
	c.startMaster()
	c.startAgent("cam1", "")
	c.startAgent("cam2", "")
	c.acceptAll("cam1", "cam2")
	dir := t.TempDir()
	pillar := fmt.Sprintf(`pillar={"dir": "%s"}`, dir)

	// test=True: every step says what it would do; nothing changes.
	r := c.cli("halite-run", "state.orchestrate", "orch.deploy", pillar, "test=True")
	if _, err := os.Stat(filepath.Join(dir, "cam1.web")); err == nil {
		t.Errorf("test=True wrote cam1.web")
	}
	if !strings.Contains(r.stdout, "Function cmd.run would be executed on target cam*") {
		t.Errorf("test=True: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// On a terminal, halite-run shows the steps as they end, then erases
	// its status line before the result.
	r = c.cliTTY("halite-run", "state.orchestrate", "orch.deploy", pillar, "test=True")
	for _, want := range []string{"[state.orchestrate ", "step 1 of 4: prepare: would change (test)", "step 3 of 4: broken", "\r\x1b[K"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("progress on a terminal: %q missing from stderr %q", want, r.stderr)
		}
	}
	if !strings.HasSuffix(r.stderr, "\r\x1b[K") || !strings.Contains(r.stdout, "orchmaster:") {
		t.Errorf("the status line is not erased before the result: stderr %q\nstdout %s", r.stderr, r.stdout)
	}

	r = c.cli("halite-run", "state.orchestrate", "orch.deploy", pillar)
	if r.code != 1 {
		t.Errorf("a failed step: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"orchmaster:", "ID: prepare", "ID: apply_web", "ID: broken",
		"Function ran successfully. Function cmd.run ran on cam1, cam2.",
		"States ran successfully. Updating cam1, cam2.",
		"Running function cmd.retcode failed on minions: cam1",
		"Summary for orchmaster", "Succeeded: 2 (changed=3)", "Failed:    1",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("highstate output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "ID: never") {
		t.Errorf("failhard: the step after the failed one ran:\n%s", r.stdout)
	}
	for _, id := range []string{"cam1", "cam2"} {
		b, err := os.ReadFile(filepath.Join(dir, id+".web"))
		if err != nil || string(b) != "deployed by orchestrate\n" {
			t.Errorf("%s.web: %q %v", id, b, err)
		}
	}

	// --out json: Salt's return, {"data": {<master>: running}, "outputter": "highstate", "retcode": 1}.
	r = c.cli("halite-run", "state.orchestrate", "orch.deploy", pillar, "--out", "json")
	var res struct {
		Data      map[string]map[string]map[string]any `json:"data"`
		Outputter string                               `json:"outputter"`
		Retcode   int                                  `json:"retcode"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--out json: %v\n%s", err, r.stdout)
	}
	running := res.Data["orchmaster"]
	if res.Outputter != "highstate" || res.Retcode != 1 || len(running) != 3 {
		t.Errorf("--out json: outputter %q retcode %d, %d states, want highstate 1 3\n%s", res.Outputter, res.Retcode, len(running), r.stdout)
	}
	web := running["salt_|-apply_web_|-apply_web_|-state"]
	if web["result"] != true || web["__run_num__"] != 1.0 || web["__jid__"] == nil {
		t.Errorf("apply_web: %v", web)
	}
	// The files are there since the run before: nothing changed.
	if web["comment"] != "States ran successfully. No changes made to cam1, cam2." {
		t.Errorf("apply_web the second time: %v", web["comment"])
	}

	// A missing SLS fails as Salt's does: the errors, retcode 1.
	r = c.cli("halite-run", "state.orchestrate", "orch.nosuch")
	if r.code != 1 || !strings.Contains(r.stdout, "orch.nosuch") {
		t.Errorf("missing SLS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A pillar that is not a dictionary is refused.
	r = c.cli("halite-run", "state.orchestrate", "orch.deploy", "pillar=[1]")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "Pillar data must be formatted as a dictionary") {
		t.Errorf("pillar=[1]: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestOrchestrateFromReactor: a reactor's runner.state.orchestrate
// reaction, in the form of Salt's reactor docs, runs an orchestration
// whose salt.state step applies web.sls on the agents, with the event's
// data passed as pillar; a local reaction with batch: beside it runs
// through the shared rolling batch.
func TestOrchestrateFromReactor(t *testing.T) {
	conf, root := orchRoots(t)
	react := filepath.Join(root, "react.sls")
	if err := os.WriteFile(react, []byte(`run_orch:
  runner.state.orchestrate:
    - args:
      - mods: orch.react
      - pillar:
          dir: {{ data['dir'] }}

batched:
  local.cmd.run:
    - tgt: 'cam*'
    - batch: 1
    - args:
      - cmd: echo one >> {{ data['dir'] }}/batched
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, conf+"reactor:\n  - 'myco/release':\n    - "+react+"\n")
	c.startMaster()
	c.startAgent("cam1", "")
	c.startAgent("cam2", "")
	c.acceptAll("cam1", "cam2")
	dir := t.TempDir()
	if r := c.cli("halite-run", "event.send", "myco/release", fmt.Sprintf(`{"dir": "%s"}`, dir)); r.code != 0 {
		t.Fatalf("event.send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, 60*time.Second, "web.sls applied by the reactor's orchestration", func() bool {
		for _, id := range []string{"cam1", "cam2"} {
			if _, err := os.Stat(filepath.Join(dir, id+".web")); err != nil {
				return false
			}
		}
		return true
	})
	// The local reaction with batch: 1 (package batch, as halite -b)
	// ran on both cameras.
	waitFor(t, 60*time.Second, "the batched reaction on both cameras", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "batched"))
		return string(b) == "one\none\n"
	})
}
