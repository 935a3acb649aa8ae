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

// TestBeaconsDriveReactor: a log beacon on a device fires when a line
// matches, the event reaches the master with Salt's beacon data shape, and
// a reactor file from Salt's documentation style runs a job back on the
// device. The beacons.* functions change the beacons at run time, and
// events made while the master is away are delivered when it is back.
func TestBeaconsDriveReactor(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv", "reactor")
	os.MkdirAll(srv, 0o755)
	marker := filepath.Join(root, "reacted")
	logFile := filepath.Join(root, "auth.log")
	os.WriteFile(logFile, []byte("boot\n"), 0o644)
	os.WriteFile(filepath.Join(srv, "sshd.sls"), []byte(`{% if data['match'] == 'yes' %}
note_failure:
  local.cmd.run:
    - tgt: {{ data['data']['id'] }}
    - args:
      - cmd: {{ ("echo '" + data['raw'] + "' >> `+marker+`") | yaml_dquote }}
{% endif %}
`), 0o644)
	c := newCluster(t, "reactor:\n  - 'salt/beacon/*/authlog/sshd_fail':\n    - "+filepath.Join(srv, "sshd.sls")+"\n")
	c.startMaster()
	c.startAgent("cam1", "beacons:\n  authlog:\n    - beacon_module: log\n    - file: "+logFile+"\n    - interval: 0.2\n    - tags:\n        sshd_fail:\n          regex: 'Failed password for (\\w+)'\n")
	c.acceptAll("cam1")

	appendLine := func(line string) {
		f, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(line + "\n")
		f.Close()
	}
	// The beacon starts at the end of the file; give it a check first.
	waitFor(t, 20*time.Second, "beacon running", func() bool {
		r := c.cli("halite", "cam1", "beacons.list", "--out", "json")
		return strings.Contains(r.stdout, "authlog")
	})
	appendLine("sshd: Failed password for root from 10.0.0.9")
	waitFor(t, 30*time.Second, "the reactor to run on the beacon event", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "Failed password for root")
	})

	// beacons.add with a bad option is refused with the option named.
	rets, _ := c.jsonOut("halite", "cam1", "beacons.add", "mem", "[{'beacon_module': 'memusage'}, {'percnt': '10%'}]")
	res, _ := rets["cam1"].(map[string]any)
	if res["result"] != false || !strings.Contains(res["comment"].(string), "beacon mem: option percent is required") {
		t.Errorf("beacons.add with a bad option: %v", rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "beacons.add", "mem", "[{'beacon_module': 'memusage'}, {'percent': '0%'}, {'interval': 3600}]")
	if res, _ := rets["cam1"].(map[string]any); res["result"] != true {
		t.Errorf("beacons.add: %v", rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "beacons.modify", "mem", "[{'beacon_module': 'memusage'}, {'percent': 'lots'}]")
	if res, _ := rets["cam1"].(map[string]any); res["result"] != false || !strings.Contains(fmt.Sprint(res["comment"]), "percent") {
		t.Errorf("beacons.modify with a bad option: %v, want a refusal naming percent", rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "beacons.modify", "mem", "[{'beacon_module': 'memusage'}, {'percent': '1%'}, {'interval': 1800}]")
	if res, _ := rets["cam1"].(map[string]any); res["result"] != true || res["comment"] != "Modified beacon: mem." {
		t.Errorf("beacons.modify: %v", rets)
	}
	rets, _ = c.jsonOut("halite", "cam1", "beacons.list")
	var list map[string]any
	if m, ok := rets["cam1"].(map[string]any); ok {
		list = m
	}
	if _, ok := list["mem"]; !ok {
		t.Errorf("beacons.list after add: %v", rets)
	}
	if rets, _ := c.jsonOut("halite", "cam1", "beacons.save"); !strings.Contains(jsonString(rets), "beacons.conf") {
		t.Errorf("beacons.save: %v", rets)
	}
	saved, err := os.ReadFile(filepath.Join(c.agentDir("cam1"), "agent.d", "beacons.conf"))
	if err != nil || !strings.Contains(string(saved), "memusage") || !strings.Contains(string(saved), "authlog") {
		t.Errorf("agent.d/beacons.conf: %v\n%s", err, saved)
	}

	// The master goes away; a beacon event made meanwhile is spooled and
	// reaches the reactor when the master is back.
	c.stop(c.master)
	appendLine("sshd: Failed password for admin from 10.0.0.7")
	waitFor(t, 20*time.Second, "the agent to spool the event", func() bool {
		st, err := os.Stat(filepath.Join(c.root, "cam1", "var", "cache", "halite", "agent", "spool", "outbox.log"))
		return err == nil && st.Size() > 0
	})
	c.startMaster()
	waitFor(t, 60*time.Second, "the spooled beacon event to drive the reactor", func() bool {
		b, _ := os.ReadFile(marker)
		return strings.Contains(string(b), "Failed password for admin")
	})
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestBadBeaconRefusedAtStart: the agent does not start with a beacon
// whose options are wrong, and says which beacon and which option.
func TestBadBeaconRefusedAtStart(t *testing.T) {
	c := newCluster(t, "")
	p := c.startAgent("cam1", "beacons:\n  memusage:\n    - percent: lots\n")
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent kept running with a bad beacon")
	}
	if out := p.output(); !strings.Contains(out, "beacon memusage: option percent: expected a percentage") {
		t.Errorf("agent output does not name the beacon and option:\n%s", out)
	}
	if code := p.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit status 0")
	}
}

// TestMasterlessBeacons: an agent without a master runs its beacons into
// its own caller reactor; halite-call beacons.* reaches the running agent.
func TestMasterlessBeacons(t *testing.T) {
	root := t.TempDir()
	marker := filepath.Join(root, "hot")
	sls := filepath.Join(root, "hot.sls")
	os.WriteFile(sls, []byte("note:\n  caller.cmd.run:\n    - args:\n      - cmd: touch "+marker+"\n"), 0o644)
	dir := filepath.Join(root, "etc")
	os.MkdirAll(dir, 0o755)
	conf := "id: solo\nroot_dir: " + filepath.Join(root, "solo") + "\nmaster_type: disable\nfile_client: local\nlog_file: ''\n" +
		"reactor:\n  - 'salt/beacon/solo/memusage/':\n    - " + sls + "\n" +
		"beacons:\n  memusage:\n    - percent: 0%\n    - interval: 0.5\n    - onchangeonly: True\n"
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	c := &cluster{t: t, root: root, agents: map[string]*proc{}}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	t.Cleanup(func() {
		c.stop(p)
		if t.Failed() {
			t.Logf("agent output:\n%s", p.output())
		}
	})
	waitFor(t, 30*time.Second, "the beacon to drive the caller reactor", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
	r := runCmd(t, "halite-call", "-c", dir, "beacons.list", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"memusage"`) || !strings.Contains(r.stdout, `"percent": "0%"`) {
		t.Errorf("halite-call beacons.list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCmd(t, "halite-call", "-c", dir, "beacons.disable_beacon", "memusage", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, "Beacon memusage disabled.") {
		t.Errorf("halite-call beacons.disable_beacon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestMasterlessUserEngine: a masterless agent runs a user engine from its
// local file root (root_dir/srv/salt/_engines), whose events drive its
// caller reactor.
func TestMasterlessUserEngine(t *testing.T) {
	root := t.TempDir()
	solo := filepath.Join(root, "solo")
	os.MkdirAll(filepath.Join(solo, "srv", "salt", "_engines"), 0o755)
	os.WriteFile(filepath.Join(solo, "srv", "salt", "_engines", "hello.sh"),
		[]byte("#!/bin/sh\necho '{\"tag\": \"myco/hello\", \"data\": {}}'\nwhile read -r l; do :; done\n"), 0o755)
	marker := filepath.Join(root, "hello")
	sls := filepath.Join(root, "hello.sls")
	os.WriteFile(sls, []byte("note:\n  caller.cmd.run:\n    - args:\n      - cmd: touch "+marker+"\n"), 0o644)
	dir := filepath.Join(root, "etc")
	os.MkdirAll(dir, 0o755)
	conf := "id: solo\nroot_dir: " + solo + "\nmaster_type: disable\nfile_client: local\nlog_file: ''\n" +
		"reactor:\n  - 'myco/hello':\n    - " + sls + "\nengines:\n  - hello: {}\n"
	os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644)
	c := &cluster{t: t, root: root, agents: map[string]*proc{}}
	p := c.start("halite-agent", "-c", dir, "-l", "info")
	t.Cleanup(func() {
		c.stop(p)
		if t.Failed() {
			t.Logf("agent output:\n%s", p.output())
		}
	})
	waitFor(t, 30*time.Second, "the local user engine to drive the caller reactor", func() bool {
		_, err := os.Stat(marker)
		return err == nil
	})
}
