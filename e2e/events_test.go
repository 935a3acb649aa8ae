package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// eventStream runs halite-run state.event in the background and returns a
// channel of its lines.
func (c *cluster) eventStream(t *testing.T, args ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "halite-run"), append([]string{"-c", c.masterDir(), "state.event"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() { cancel(); cmd.Wait() })
	// The command subscribes some time after it starts: until an event
	// fired now is seen on the stream, an event could be missed. Fire a
	// marker until it comes through; what came before it is dropped
	// (callers start what they watch after this returns).
	marker := fmt.Sprintf("e2e/stream/ready/%d", time.Now().UnixNano())
	deadline := time.Now().Add(30 * time.Second)
	for {
		if r := runCmd(t, "halite-run", "-c", c.masterDir(), "event.send", marker, "{}"); r.code != 0 {
			t.Fatalf("halite-run event.send: exit %d, %s", r.code, r.stderr)
		}
		wait := time.After(time.Second)
	drain:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("event stream ended before it was ready")
				}
				if strings.HasPrefix(l, marker+"\t") {
					return lines
				}
			case <-wait:
				break drain
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("halite-run state.event did not show an event within 30s")
		}
	}
}

func nextEvent(t *testing.T, lines <-chan string, tagPrefix string) (string, map[string]any) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("event stream ended before %s", tagPrefix)
			}
			tag, js, _ := strings.Cut(l, "\t")
			if !strings.HasPrefix(tag, tagPrefix) {
				continue
			}
			var data map[string]any
			if err := json.Unmarshal([]byte(js), &data); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", tag, err)
			}
			return tag, data
		case <-timeout:
			t.Fatalf("no event %s within 15s", tagPrefix)
		}
	}
}

// TestEvents: Salt's tags and fields on the master's bus, and an event
// fired on a device with halite-call.
func TestEvents(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	lines := c.eventStream(t)
	c.startAgent("dev1", "")
	_, auth := nextEvent(t, lines, "salt/auth")
	// Salt fires result True with act pend (_auth in salt/channel/server.py).
	if auth["id"] != "dev1" || auth["act"] != "pend" || auth["result"] != true {
		t.Errorf("salt/auth: %v, want id dev1 act pend result true", auth)
	}
	c.acceptAll("dev1")
	_, key := nextEvent(t, lines, "salt/key")
	if key["id"] != "dev1" || key["act"] != "accept" {
		t.Errorf("salt/key: %v", key)
	}
	tag, start := nextEvent(t, lines, "salt/minion/")
	if tag != "salt/minion/dev1/start" || start["id"] != "dev1" {
		t.Errorf("start event: %s %v", tag, start)
	}
	c.cli("halite", "dev1", "test.ping")
	tag, nw := nextEvent(t, lines, "salt/job/")
	if !strings.HasSuffix(tag, "/new") || nw["fun"] != "test.ping" || nw["tgt"] != "dev1" {
		t.Errorf("job new: %s %v", tag, nw)
	}
	if m, _ := nw["minions"].([]any); len(m) != 1 || m[0] != "dev1" {
		t.Errorf("job new minions: %v", nw["minions"])
	}
	for _, k := range []string{"jid", "tgt_type", "arg", "user", "_stamp"} {
		if _, ok := nw[k]; !ok {
			t.Errorf("salt/job/<jid>/new has no %q: %v", k, nw)
		}
	}
	tag, ret := nextEvent(t, lines, "salt/job/")
	if !strings.HasSuffix(tag, "/ret/dev1") || ret["return"] != true || ret["success"] != true {
		t.Errorf("job ret: %s %v", tag, ret)
	}
	for _, k := range []string{"id", "jid", "fun", "fun_args", "return", "retcode", "success", "_stamp"} {
		if _, ok := ret[k]; !ok {
			t.Errorf("return event has no %q: %v", k, ret)
		}
	}

	// An event fired on the device arrives as Salt's minion events do.
	r := runCmd(t, "halite-call", "-c", c.agentDir("dev1"), "event.send", "myco/door/open", `{"k": "v"}`)
	if r.code != 0 {
		t.Fatalf("halite-call event.send: exit %d %s", r.code, r.stderr)
	}
	tag, ev := nextEvent(t, lines, "myco/")
	d, _ := ev["data"].(map[string]any)
	if tag != "myco/door/open" || ev["id"] != "dev1" || ev["tag"] != "myco/door/open" || d["k"] != "v" || ev["_stamp"] == nil {
		t.Errorf("device event: %s %v, want id dev1, tag, data {k: v}, _stamp", tag, ev)
	}
	// Tags reserved for the master are refused at the device.
	r = runCmd(t, "halite-call", "-c", c.agentDir("dev1"), "event.send", "salt/job/1/ret/x", `{}`)
	if r.code == 0 || !strings.Contains(r.stderr, "reserved") {
		t.Errorf("reserved tag: exit %d, stderr %q; want refusal", r.code, r.stderr)
	}
	// halite-run event.send fires on the master's bus.
	c.cli("halite-run", "event.send", "ops/note", `{"x": 1}`)
	_, note := nextEvent(t, lines, "ops/")
	if note["x"] != float64(1) {
		t.Errorf("event.send runner: %v", note)
	}
	// halite-call --local runs with no master at all.
	r = runCmd(t, "halite-call", "-c", c.agentDir("dev1"), "--local", "test.echo", "hi", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"local": "hi"`) {
		t.Errorf("halite-call --local test.echo: exit %d, %q", r.code, r.stdout)
	}
}
