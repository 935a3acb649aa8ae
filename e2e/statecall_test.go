package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCallStateApplyThroughMaster: halite-call state.apply on a device
// that has a master, directly and behind a relay. The master compiles for
// the asking device (Jinja with its grains), the agent verifies the
// signed answer, and the states run in halite-call, which prints the
// highstate output, exits as salt-call does (salt/cli/caller.py
// BaseCaller.run: 1 when the retcode is not 0, the retcode itself with
// --retcode-passthrough) and returns the job to the master (BaseCaller.call
// return_pub; the master stores it under a jid of its own with the
// minion's id as target, salt/utils/job.py store_job).
func TestCallStateApplyThroughMaster(t *testing.T) {
	out := t.TempDir()
	roots := writeFileRoots(t, map[string]string{
		"top.sls": "base:\n  '*':\n    - web\n",
		"web.sls": `motd:
  file.managed:
    - name: ` + out + `/{{ grains['id'] }}.txt
    - contents: hello {{ grains['id'] }}
`,
		"broken.sls": "failing:\n  test.fail_without_changes: []\n",
	})
	c := newCluster(t, roots+relayAllow)
	c.startMaster()
	rPort := freeUDPPort(t)
	c.startAgent("cam1", "")
	c.startAgent("r1", relayConf(rPort))
	c.acceptAll("cam1", "r1")
	c.startBehind("d1", rPort, "")
	c.waitPending(1)
	c.acceptAll("d1")
	c.waitUp("cam1", "d1")

	call := func(id string, args ...string) result {
		t.Helper()
		return runCmd(t, "halite-call", append([]string{"-c", c.agentDir(id)}, args...)...)
	}
	target := filepath.Join(out, "cam1.txt")

	// test=True: the states the master compiled, nothing changed.
	r := call("cam1", "state.apply", "test=True")
	if r.code != 0 || !strings.Contains(r.stdout, "Summary for local") || !strings.Contains(r.stdout, "is set to be") {
		t.Errorf("state.apply test=True: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(target); err == nil {
		t.Errorf("state.apply test=True wrote %s", target)
	}

	// Applied for real, in the highstate output.
	r = call("cam1", "state.apply")
	if r.code != 0 || !strings.Contains(r.stdout, "Succeeded: 1 (changed=1)") || !strings.Contains(r.stdout, "ID: motd") {
		t.Errorf("state.apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "hello cam1\n" && string(b) != "hello cam1" {
		t.Errorf("%s: got %q (%v), want hello cam1", target, b, err)
	}

	// A failing state: exit 1, or its retcode with --retcode-passthrough.
	r = call("cam1", "state.sls", "broken")
	if r.code != 1 || !strings.Contains(r.stdout, "Failed:    1") {
		t.Errorf("state.sls broken: exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = call("cam1", "--retcode-passthrough", "state.sls", "broken")
	if r.code != 2 {
		t.Errorf("state.sls broken --retcode-passthrough: exit %d, want 2 (EX_STATE_FAILURE)\n%s%s", r.code, r.stdout, r.stderr)
	}

	// show_sls: the master's high data for this device.
	r = call("cam1", "state.show_sls", "web", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, filepath.Join(out, "cam1.txt")) {
		t.Errorf("state.show_sls web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The returns reached the master, as jobs of user halite-call
	// targeted at the device.
	jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	var applied string
	for jid, j := range jobs {
		if m, _ := j.(map[string]any); m["User"] == "halite-call" && m["Function"] == "state.apply" && m["Target"] == "cam1" {
			if rets, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid); rets["cam1"] != nil && strings.Contains(fmt.Sprint(rets["cam1"]), "File "+target+" updated") {
				applied = jid
			}
		}
	}
	if applied == "" {
		t.Errorf("no stored halite-call state.apply job with cam1's changed return in %v", jobs)
	}

	// Behind a relay.
	r = call("d1", "state.apply")
	if r.code != 0 || !strings.Contains(r.stdout, "Succeeded: 1 (changed=1)") {
		t.Errorf("state.apply behind a relay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(out, "d1.txt")); err != nil || !strings.HasPrefix(string(b), "hello d1") {
		t.Errorf("d1.txt: got %q (%v), want hello d1", b, err)
	}
	// mine.get goes through the relay too (it is forwarded with StateGet).
	if r := call("d1", "mine.get", "*", "test.ping", "--out", "json"); r.code != 0 {
		t.Errorf("mine.get behind a relay: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestReactorStateApply: a reactor reaction local.state.apply, as Salt's
// reactor documentation writes it (tgt from the event's id, arg the SLS),
// run end to end: an event from a device, the master's reactor publishing
// the state job, compiled for that device, applied by its agent.
func TestReactorStateApply(t *testing.T) {
	out := t.TempDir()
	roots := t.TempDir()
	files := map[string]string{
		"reactor/deploy.sls": `apply_web:
  local.state.apply:
    - tgt: {{ data['id'] }}
    - arg:
      - web.deploy
`,
		"web/deploy.sls": `deployed:
  file.managed:
    - name: ` + out + `/{{ grains['id'] }}.conf
    - contents: deployed on {{ grains['id'] }}
    - makedirs: True
`,
	}
	for name, body := range files {
		p := filepath.Join(roots, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCluster(t, "auto_accept: True\nfile_roots:\n  base:\n    - "+roots+"\nreactor:\n  - 'myco/deploy':\n    - salt://reactor/deploy.sls\n")
	c.startMaster()
	c.startAgent("cam1", "")
	c.startAgent("cam2", "")
	c.waitUp("cam1", "cam2")

	r := runCmd(t, "halite-call", "-c", c.agentDir("cam1"), "event.send", "myco/deploy", `{"app": "web"}`)
	if r.code != 0 {
		t.Fatalf("event.send: exit %d %s", r.code, r.stderr)
	}
	target := filepath.Join(out, "cam1.conf")
	waitFor(t, 30*time.Second, "the reaction's state applied on cam1", func() bool {
		b, err := os.ReadFile(target)
		return err == nil && strings.HasPrefix(string(b), "deployed on cam1")
	})
	// Only the device that sent the event.
	if _, err := os.Stat(filepath.Join(out, "cam2.conf")); err == nil {
		t.Errorf("the reaction applied the state on cam2 too")
	}
	// The job the reactor published is a state.apply of user Reactor.
	jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	found := false
	for _, j := range jobs {
		if m, _ := j.(map[string]any); m["User"] == "Reactor" && m["Function"] == "state.apply" && m["Target"] == "cam1" {
			found = true
		}
	}
	if !found {
		t.Errorf("no state.apply job of user Reactor for cam1 in %v", jobs)
	}
}

// TestCallStateApplyBigFile: halite-call state.sls of a file.managed
// whose salt:// file (3 MiB) is too large for the job, on a device behind
// a relay: the job carries its manifest, halite-call asks the running
// agent to fetch it (local op blob.fetch, only for a manifest of a job it
// handed out), the agent fetches the chunks from its master through the
// relay, and the file arrives byte-exact.
func TestCallStateApplyBigFile(t *testing.T) {
	roots, data := bigFileRootsN(t, 3<<20)
	c := newCluster(t, roots+relayAllow)
	port := c.masterAndRelay("r1")
	dests := c.devicesWithDest(port, "d1")
	c.waitPending(1)
	c.acceptAll("d1")
	c.waitUp("d1")

	r := runCmd(t, "halite-call", "-c", c.agentDir("d1"), "state.sls", "big")
	if r.code != 0 || !strings.Contains(r.stdout, "Succeeded: 1 (changed=1)") {
		t.Fatalf("halite-call state.sls big: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkFile(t, dests["d1"], data)
	r = runCmd(t, "halite-call", "-c", c.agentDir("d1"), "state.sls", "big")
	if r.code != 0 || !strings.Contains(r.stdout, "is in the correct state") {
		t.Errorf("halite-call state.sls big again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
