package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEnrolmentAndJobs walks through what a new user does first: agents
// whose keys wait, halite-key to accept them, then jobs of every kind.
func TestEnrolmentAndJobs(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("cam1", "grains:\n  site: north\n  model: x100\n")
	c.startAgent("cam2", "grains:\n  site: south\n  model: x200\n")
	c.startAgent("gw1", "grains:\n  site: north\n  roles: [gateway, relay]\n")

	// Keys arrive pending; nothing is accepted by itself.
	waitFor(t, 20*time.Second, "three pending keys", func() bool {
		keys, _ := c.jsonOut("halite-key", "-L")
		pre, _ := keys["minions_pre"].([]any)
		return len(pre) == 3
	})
	r := c.cli("halite-key", "-L")
	if want := "Accepted Keys:\nDenied Keys:\nUnaccepted Keys:\ncam1\ncam2\ngw1\nRejected Keys:\n"; r.stdout != want {
		t.Errorf("halite-key -L:\ngot  %q\nwant %q", r.stdout, want)
	}
	// A target matches accepted minions only.
	r = c.cli("halite", "*", "test.ping")
	if r.code != 2 || !strings.Contains(r.stdout, "No minions matched the target") {
		t.Errorf("test.ping with no accepted key: exit %d, stdout %q; want 2 and 'No minions matched the target', as salt", r.code, r.stdout)
	}
	if r := c.cli("halite-key", "-a", "cam*", "-y"); r.code != 0 || !strings.Contains(r.stdout, "Key for minion cam1 accepted.") {
		t.Fatalf("halite-key -a cam* -y: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.waitUp("cam1", "cam2")
	rets, r := c.jsonOut("halite", "*", "test.ping")
	if r.code != 0 || len(rets) != 2 || rets["cam1"] != true || rets["cam2"] != true {
		t.Fatalf("test.ping: exit %d, got %v; want cam1 and cam2 true\nstderr: %s", r.code, rets, r.stderr)
	}
	c.acceptAll("cam1", "cam2", "gw1")

	// Default (nested) output, as salt prints it.
	r = c.cli("halite", "-L", "cam1", "test.ping")
	if r.stdout != "cam1:\n    True\n" || r.code != 0 {
		t.Errorf("nested test.ping: exit %d, got %q, want %q", r.code, r.stdout, "cam1:\n    True\n")
	}
	// Grains, static ones included.
	rets, _ = c.jsonOut("halite", "*", "grains.item", "site", "os")
	for id, want := range map[string]string{"cam1": "north", "cam2": "south", "gw1": "north"} {
		g, _ := rets[id].(map[string]any)
		if g["site"] != want || g["os"] == nil {
			t.Errorf("grains.item site os on %s: got %v, want site %q and an os", id, g, want)
		}
	}
	// Arguments: positional, YAML-typed and keyword.
	rets, _ = c.jsonOut("halite", "cam1", "test.arg", "1", "two", "[3]", "k=v")
	want := `{"args":[1,"two",[3]],"kwargs":{"k":"v"}}`
	if got, _ := json.Marshal(rets["cam1"]); string(got) != want {
		t.Errorf("test.arg: got %s, want %s", got, want)
	}
	// cmd.run with cwd; a failing command fails the CLI.
	rets, r = c.jsonOut("halite", "-L", "cam1,cam2", "cmd.run", "pwd; echo out", "cwd=/tmp")
	if r.code != 0 || rets["cam1"] != "/tmp\nout" {
		t.Errorf("cmd.run: exit %d, got %v", r.code, rets)
	}
	_, r = c.jsonOut("halite", "cam1", "cmd.run", "exit 3")
	if r.code == 0 {
		t.Errorf("cmd.run 'exit 3': exit 0, want non-zero")
	}
	// An unknown function is a failed return, not a crash.
	rets, r = c.jsonOut("halite", "cam1", "no.such_function")
	if r.code == 0 || !strings.Contains(rets["cam1"].(string), "not available") {
		t.Errorf("unknown function: exit %d, got %v; want a failed return saying it is not available", r.code, rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "test.ping")
	if rets["cam1"] != true {
		t.Errorf("agent did not survive an unknown function: %v", rets)
	}
	// --async prints the jid; the job cache has the returns.
	r = c.cli("halite", "--async", "*", "test.echo", "hello")
	if !strings.HasPrefix(r.stdout, "Executed command with job ID: ") {
		t.Fatalf("--async: got %q", r.stdout)
	}
	jid := strings.TrimSpace(strings.TrimPrefix(r.stdout, "Executed command with job ID: "))
	if len(jid) != 20 {
		t.Fatalf("--async jid %q is not 20 digits", jid)
	}
	waitFor(t, 10*time.Second, "async returns in the job cache", func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
		return len(m) == 3 && m["gw1"] == "hello"
	})
	jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	job, _ := jobs[jid].(map[string]any)
	if job["Function"] != "test.echo" || job["Target"] != "*" {
		t.Errorf("jobs.list_jobs[%s] = %v, want Function test.echo, Target *", jid, job)
	}
	pj, _ := c.jsonOut("halite-run", "jobs.print_job", jid)
	if info, _ := pj[jid].(map[string]any); info == nil || len(info["Result"].(map[string]any)) != 3 {
		t.Errorf("jobs.print_job: got %v", pj)
	}
	// Output formats.
	r = c.cli("halite", "cam1", "test.ping", "--out", "yaml")
	if r.stdout != "cam1: true\n" {
		t.Errorf("--out yaml: got %q", r.stdout)
	}
	r = c.cli("halite", "cam1", "test.ping", "--out", "txt")
	if r.stdout != "cam1: True\n" {
		t.Errorf("--out txt: got %q", r.stdout)
	}
	// Bad CLI use is a usage error, with salt's statuses
	// (salt/utils/parsers.py): 42 without a function, 64 for a bad flag.
	if r := c.cli("halite", "*"); r.code != 42 {
		t.Errorf("halite with no function: exit %d, want 42", r.code)
	}
	if r := c.cli("halite", "--bogus", "*", "test.ping"); r.code != 64 {
		t.Errorf("halite --bogus: exit %d, want 64", r.code)
	}
	if r := c.cli("halite", "-E", "(", "test.ping"); r.code != 2 {
		t.Errorf("halite -E '(': exit %d, want 2 for a malformed target; stderr %q", r.code, r.stderr)
	}
	// manage.status and fingerprints.
	st, _ := c.jsonOut("halite-run", "manage.status")
	if up, _ := st["up"].([]any); len(up) != 3 {
		t.Errorf("manage.status: got %v, want 3 up", st)
	}
	f, _ := c.jsonOut("halite-key", "-F")
	acc, _ := f["minions"].(map[string]any)
	if fp, _ := acc["cam1"].(string); strings.Count(fp, ":") != 31 {
		t.Errorf("halite-key -F: cam1 fingerprint %q, want 32 colon-separated bytes", fp)
	}
	// The master's socket is for its user only.
	fi, err := os.Stat(filepath.Join(c.root, "master", "var", "run", "halite", "master", "master.sock"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("master socket mode: %v %v, want 0600", fi.Mode().Perm(), err)
	}
}

// TestTimeoutAndMissing: a minion that is not connected is reported as
// such and makes the CLI fail, without waiting for gather_job_timeout.
// -t is not a deadline, as in Salt (get_iter_returns and gather_job_info
// in salt/client/__init__.py): once it has passed, the minions still
// running the job (saltutil.find_job) are waited for, and a minion that
// stops answering is given up.
func TestTimeoutAndMissing(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("fast", "")
	c.startAgent("gone", "")
	c.startAgent("slow", "")
	c.acceptAll("fast", "gone", "slow")
	c.stop(c.agents["gone"])
	waitFor(t, 10*time.Second, "gone down", func() bool {
		m, _ := c.jsonOut("halite-run", "manage.status")
		down, _ := m["down"].([]any)
		return len(down) == 1
	})
	start := time.Now()
	r := c.cli("halite", "-t", "2", "-L", "fast,gone", "test.ping")
	if r.code != 1 {
		t.Errorf("exit %d with a minion down, want 1", r.code)
	}
	if !strings.Contains(r.stdout, "fast:\n    True") || !strings.Contains(r.stdout, "gone:\n    Minion did not return. [Not connected]") {
		t.Errorf("output:\n%s\nwant fast True and gone [Not connected]", r.stdout)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("-t 2 with a minion not connected waited %s, want no gather_job_timeout (10s)", d)
	}

	start = time.Now()
	r = c.cli("halite", "-t", "1", "fast", "test.sleep", "3")
	if r.code != 0 || r.stdout != "fast:\n    True\n" {
		t.Errorf("test.sleep 3 with -t 1: exit %d, output %q, stderr %q; want 0 and True", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("test.sleep 3 returned after %s", d)
	}

	// A minion that stops while it runs the job is given up once it no
	// longer answers find_job, long before the job would have ended.
	lines := c.eventStream(t)
	done := make(chan result, 1)
	start = time.Now()
	go func() { done <- c.cli("halite", "-t", "1", "--gather-job-timeout", "1", "slow", "test.sleep", "60") }()
	for {
		// find_job answers that the job runs.
		tag, d := nextEvent(t, lines, "salt/job/")
		if strings.HasSuffix(tag, "/ret/slow") && d["fun"] == "saltutil.find_job" {
			if m, _ := d["return"].(map[string]any); m["fun"] != "test.sleep" {
				t.Fatalf("saltutil.find_job: got %v, want the data of test.sleep", d["return"])
			}
			break
		}
	}
	c.stop(c.agents["slow"])
	r = <-done
	if r.code != 1 || !strings.Contains(r.stdout, "slow:\n    Minion did not return.") {
		t.Errorf("a stopped minion: exit %d, output %q; want 1 and did not return", r.code, r.stdout)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("a stopped minion was waited for %s", d)
	}
}
