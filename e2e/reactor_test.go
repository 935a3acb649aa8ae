package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReactor: reactor files in Salt's form, run by the real master on
// real events: a custom event from a device driving a local job, Salt's
// auto-accept example on salt/auth driving wheel key.accept, and a minion
// start reaction.
func TestReactor(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv", "reactor")
	os.MkdirAll(srv, 0o755)
	marker := filepath.Join(root, "deployed")
	started := filepath.Join(root, "started")
	files := map[string]string{
		// A custom event from a device drives a local job on that device.
		"deploy.sls": `{% if data['data']['app'] == 'web' %}
deploy_app:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - args:
      - cmd: touch ` + marker + `
{% endif %}
`,
		// Salt's auto-accept example: pending keys of ids starting with
		// "ok-" are accepted, others are left alone.
		"auth.sls": `{% if 'act' in data and data['act'] == 'pend' and data['id'].startswith('ok-') %}
minion_add:
  wheel.key.accept:
    - match: {{ data['id'] }}
{% endif %}
`,
		// On minion start, old argument schema.
		"start.sls": `mark_start:
  local.cmd.run:
    - tgt: {{ data['id'] }}
    - arg:
      - echo {{ data['id'] }} >> ` + started + `
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(srv, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCluster(t, `file_roots:
  base:
    - `+filepath.Join(root, "srv")+`
reactor:
  - 'myco/deploy':
    - salt://reactor/deploy.sls
  - 'salt/auth':
    - `+filepath.Join(srv, "auth.sls")+`
  - 'salt/minion/*/start':
    - `+filepath.Join(srv, "start.sls")+`
`)
	c.startMaster()
	c.startAgent("ok-cam", "")
	c.startAgent("other", "")
	// ok-cam is accepted by the reactor; other stays pending.
	c.waitUp("ok-cam")
	keys, _ := c.jsonOut("halite-key", "-L")
	if pre, _ := keys["minions_pre"].([]any); len(pre) != 1 || pre[0] != "other" {
		t.Errorf("pending keys = %v, want [other]", keys["minions_pre"])
	}
	// The start reaction ran on ok-cam.
	waitFor(t, 20*time.Second, "minion start reaction", func() bool {
		b, _ := os.ReadFile(started)
		return strings.Contains(string(b), "ok-cam")
	})
	// The job it started carries user Reactor.
	jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	reactorJobs := 0
	for _, j := range jobs {
		if m, _ := j.(map[string]any); m["User"] == "Reactor" {
			reactorJobs++
		}
	}
	if reactorJobs == 0 {
		t.Errorf("no job with user Reactor in %v", jobs)
	}
	// A device's event drives a local job back on it.
	r := runCmd(t, "halite-call", "-c", c.agentDir("ok-cam"), "event.send", "myco/deploy", `{"app": "web"}`)
	if r.code != 0 {
		t.Fatalf("event.send: exit %d %s", r.code, r.stderr)
	}
	waitFor(t, 20*time.Second, "deploy reaction", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	// reactor.list shows the configuration.
	if r := c.cli("halite-run", "reactor.list", "--out", "json"); !strings.Contains(r.stdout, "myco/deploy") {
		t.Errorf("reactor.list: %q", r.stdout)
	}
	// A reactor.conf dropped into master.d is picked up on SIGHUP.
	os.MkdirAll(filepath.Join(c.masterDir(), "master.d"), 0o755)
	os.WriteFile(filepath.Join(c.masterDir(), "master.d", "reactor.conf"),
		[]byte("reactor:\n  - 'myco/late':\n    - "+filepath.Join(srv, "start.sls")+"\n"), 0o644)
	c.master.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, 20*time.Second, "reactor rules reloaded on SIGHUP", func() bool {
		r := c.cli("halite-run", "reactor.list", "--out", "json")
		return strings.Contains(r.stdout, "myco/late")
	})
}

// TestMasterlessCallerReactor: an agent with no master runs its own
// reactor section with caller reactions, driven by halite-call event.fire.
func TestMasterlessCallerReactor(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "touched")
	sls := filepath.Join(root, "touch.sls")
	os.WriteFile(sls, []byte("touch_file:\n  caller.cmd.run:\n    - args:\n      - cmd: touch "+marker+"\n"), 0o644)
	dir := filepath.Join(root, "etc")
	os.MkdirAll(dir, 0o755)
	conf := "id: solo\nroot_dir: " + filepath.Join(root, "solo") + "\nmaster_type: disable\nfile_client: local\nlog_file: ''\nreactor:\n  - 'door/open':\n    - " + sls + "\n"
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	c := &cluster{t: t, root: root, agents: map[string]*proc{}}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	t.Cleanup(func() {
		c.stop(p)
		if t.Failed() {
			t.Logf("agent output:\n%s", p.output())
		}
	})
	waitFor(t, 20*time.Second, "agent socket", func() bool {
		r := runCmd(t, "halite-call", "-c", dir, "event.fire", `{"door": 1}`, "door/open")
		return r.code == 0
	})
	waitFor(t, 20*time.Second, "caller reaction", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
}

// TestAuthPendingDocExample runs Salt's documented auth-pending.sls
// unchanged (the "A Complete Example" of doc/topics/reactor/index.rst in
// Salt 3006, kept in reactor/testdata/docs/14_auth_pending.sls) on the
// real master's salt/auth events. Salt fires a pending key's salt/auth
// with result True and act pend (_auth in salt/channel/server.py), so the
// file's "not data['result']" branch (wheel.key.delete) must not run: the
// key is accepted by its pend branch, never deleted.
func TestAuthPendingDocExample(t *testing.T) {
	sls, err := filepath.Abs(filepath.Join("..", "reactor", "testdata", "docs", "14_auth_pending.sls"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "reactor:\n  - 'salt/auth':\n    - "+sls+"\n")
	c.startMaster()
	lines := c.eventStream(t)
	c.startAgent("ink1", "")
	var keyEvents []string
	for {
		tag, data := nextEvent(t, lines, "salt/")
		if tag == "salt/key" {
			keyEvents = append(keyEvents, fmt.Sprint(data["act"]))
			if data["act"] == "delete" {
				t.Fatalf("the pending key of ink1 was deleted by the reactor (salt/key %v)", data)
			}
		}
		if tag == "salt/minion/ink1/start" {
			break
		}
	}
	if !slices.Equal(keyEvents, []string{"accept"}) {
		t.Errorf("salt/key acts before ink1 started: got %v, want [accept]", keyEvents)
	}
	c.waitUp("ink1")
	keys, _ := c.jsonOut("halite-key", "-L")
	if acc, _ := keys["minions"].([]any); len(acc) != 1 || acc[0] != "ink1" {
		t.Errorf("accepted keys: got %v, want [ink1]", keys["minions"])
	}
}
