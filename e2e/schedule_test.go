package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// spooledJIDs returns the jids of the schedule job's returns in the
// agent's outbox file: a return body holds its jid as field 2 (0x02, then
// a text string of 20 bytes: 0x74) and its schedule name as field 9
// (0x09, then a text string: 0x60+len).
func (c *cluster) spooledJIDs(id, job string) []string {
	b, err := os.ReadFile(c.outboxLog(id))
	if err != nil {
		return nil
	}
	re := regexp.MustCompile(`(?s)\x02\x74(\d{20}).{0,300}?\x09` + regexp.QuoteMeta(string([]byte{byte(0x60 + len(job))})+job))
	var out []string
	seen := map[string]bool{}
	for _, m := range re.FindAllSubmatch(b, -1) {
		if j := string(m[1]); !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out
}

// TestScheduleOffline: an agent runs its schedule (test.ping every second)
// while its master is stopped; every return made meanwhile waits in its
// outbox, and once the master is back it has each of them and fires
// salt/job/<jid>/ret/<id> for each, with Salt's "schedule": <name>
// (salt/utils/schedule.py handle_func).
func TestScheduleOffline(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("s1", "schedule:\n  ping:\n    function: test.ping\n    seconds: 1\n")
	c.acceptAll("s1")

	c.stop(c.master)
	var jids []string
	waitFor(t, 20*time.Second, "3 scheduled returns in s1's outbox with the master away", func() bool {
		jids = c.spooledJIDs("s1", "ping")
		return len(jids) >= 3
	})
	// The agent stops too, so the returns made offline are exactly those.
	c.stop(c.agents["s1"])
	jids = c.spooledJIDs("s1", "ping")
	c.startMaster()
	lines := c.eventStream(t)
	c.startAgent("s1", "")

	want := map[string]bool{}
	for _, j := range jids {
		want[j] = true
	}
	deadline := time.After(30 * time.Second)
	for len(want) > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("event stream ended")
			}
			tag, body, _ := strings.Cut(l, "\t")
			if !strings.HasPrefix(tag, "salt/job/") || !strings.HasSuffix(tag, "/ret/s1") {
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(body), &ev); err != nil {
				t.Fatalf("event %s: %v", tag, err)
			}
			jid, _ := ev["jid"].(string)
			if !want[jid] {
				continue
			}
			if ev["schedule"] != "ping" || ev["fun"] != "test.ping" || ev["return"] != true || ev["id"] != "s1" {
				t.Errorf("return event of %s: %v, want schedule ping, fun test.ping, return true, id s1", jid, ev)
			}
			delete(want, jid)
		case <-deadline:
			t.Fatalf("no return event within 30s for the offline returns %v (of %v)", want, jids)
		}
	}
	for _, j := range jids {
		if m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", j); m["s1"] != true {
			t.Errorf("jobs.lookup_jid %s: %v, want {s1: true}", j, m)
		}
	}
}

// TestScheduleFunctions: schedule.add refuses a bad interval and an
// unknown function with the reason; a good job is listed as Salt lists it
// and saved to agent.d/_schedule.conf; an agent whose configuration has a
// bad job does not start, naming the file and line.
func TestScheduleFunctions(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("s2", "")
	c.acceptAll("s2")
	call := func(args ...string) map[string]any {
		t.Helper()
		m, r := c.jsonOut("halite", append([]string{"s2"}, args...)...)
		ret, ok := m["s2"].(map[string]any)
		if !ok {
			t.Fatalf("halite s2 %v: %v (stderr %s)", args, m, r.stderr)
		}
		return ret
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule.add", "bad", "function=test.ping", "seconds=0"}, "the smallest is 1 second"},
		{[]string{"schedule.add", "bad", "function=test.ping", "seconds=soon"}, "expected a number of seconds"},
		{[]string{"schedule.add", "bad", "function=tst.ping", "seconds=5"}, `"tst.ping" is not available`},
		{[]string{"schedule.add", "bad", "function=test.ping", "cron=61 * * * *"}, "minute"},
		{[]string{"schedule.add", "bad", "function=test.ping"}, "no schedule"},
	} {
		ret := call(tc.args...)
		if ret["result"] != false || !strings.Contains(ret["comment"].(string), tc.want) {
			t.Errorf("%v: %v, want result false and a comment with %q", tc.args, ret, tc.want)
		}
	}
	if ret := call("schedule.add", "job1", "function=test.ping", "seconds=3600"); ret["result"] != true {
		t.Fatalf("schedule.add job1: %v", ret)
	}
	r := c.cli("halite", "s2", "schedule.list", "--out", "json")
	var list map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("schedule.list: %v\n%s", err, r.stdout)
	}
	// Salt's schedule.list: yaml.safe_dump({"schedule": ...}, default_flow_style=False).
	wantList := "schedule:\n  job1:\n    enabled: true\n    function: test.ping\n    jid_include: true\n    maxrunning: 1\n    name: job1\n    seconds: 3600\n"
	if list["s2"] != wantList {
		t.Errorf("schedule.list:\n%s\nwant\n%s", list["s2"], wantList)
	}
	saved, err := os.ReadFile(filepath.Join(c.agentDir("s2"), "agent.d", "_schedule.conf"))
	if err != nil || !strings.Contains(string(saved), "job1:") {
		t.Errorf("agent.d/_schedule.conf after schedule.add: %q, %v; want job1 in it", saved, err)
	}

	// A bad job in the configuration stops the agent at start, naming
	// where it is.
	c.writeAgentConfig("s3", "schedule:\n  good:\n    function: test.ping\n    minutes: 5\n  broken:\n    function: test.ping\n    seconds: -1\n")
	r = runCmd(t, "halite-agent", "-c", c.agentDir("s3"), "-l", "error")
	file := filepath.Join(c.agentDir("s3"), "agent")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, file+":12: schedule job broken: seconds") {
		t.Errorf("agent with a bad job: exit %d, output %q; want a failure naming %s:12 and seconds", r.code, r.stderr+r.stdout, file)
	}
}

// TestMineAcrossAgents: two agents send their mine_functions to the master
// on start; the master's mine.get runner and each agent's mine.get see both,
// and an entry with allow_tgt is given only to the agents it allows
// (salt/daemons/masterapi.py _mine_get, salt/utils/mine.py). A mine
// function that fails leaves the others' data.
func TestMineAcrossAgents(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	mine := "mine_functions:\n  test.ping: []\n  myid:\n    - mine_function: grains.get\n    - id\n  secret:\n    - mine_function: test.echo\n    - s3cret\n    - allow_tgt: m2\n  broken:\n    - mine_function: test.arg_type\n    - 1\n    - 2\n    - 3\n"
	c.startAgent("m1", mine)
	c.startAgent("m2", mine)
	c.acceptAll("m1", "m2")
	var got map[string]any
	waitFor(t, 30*time.Second, "mine data of m1 and m2", func() bool {
		got, _ = c.jsonOut("halite-run", "mine.get", "*", "myid")
		return got["m1"] == "m1" && got["m2"] == "m2"
	})
	if got, _ := c.jsonOut("halite-run", "mine.get", "*", "test.ping,secret"); !jsonEq(got, `{"test.ping": {"m1": true, "m2": true}, "secret": {"m1": "s3cret", "m2": "s3cret"}}`) {
		t.Errorf("runner mine.get * test.ping,secret: %v", got)
	}
	agentGet := func(id string, args ...string) map[string]any {
		t.Helper()
		r := runCmd(t, "halite-call", append(append([]string{"-c", c.agentDir(id), "mine.get"}, args...), "--out", "json")...)
		var m map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &m); err != nil || r.code != 0 {
			t.Fatalf("halite-call %s mine.get %v: exit %d, %v\n%s%s", id, args, r.code, err, r.stdout, r.stderr)
		}
		ret, _ := m["local"].(map[string]any)
		return ret
	}
	for _, tc := range []struct {
		id   string
		args []string
		want string
	}{
		{"m1", []string{"*", "myid"}, `{"m1": "m1", "m2": "m2"}`},
		{"m2", []string{"m1", "test.ping"}, `{"m1": true}`},
		{"m1", []string{"*", "secret"}, `{}`},
		{"m2", []string{"*", "secret"}, `{"m1": "s3cret", "m2": "s3cret"}`},
		{"m1", []string{"*", "broken"}, `{}`},
	} {
		if got := agentGet(tc.id, tc.args...); !jsonEq(got, tc.want) {
			t.Errorf("%s: mine.get %v = %v, want %s", tc.id, tc.args, got, tc.want)
		}
	}
	// mine.delete and mine.flush reach the master.
	if r := runCmd(t, "halite-call", "-c", c.agentDir("m1"), "mine.delete", "myid"); r.code != 0 {
		t.Fatalf("mine.delete: %d %s", r.code, r.stderr)
	}
	waitFor(t, 10*time.Second, "m1's myid deleted", func() bool {
		got, _ := c.jsonOut("halite-run", "mine.get", "*", "myid")
		return jsonEq(got, `{"m2": "m2"}`)
	})
	if r := runCmd(t, "halite-call", "-c", c.agentDir("m2"), "mine.flush"); r.code != 0 {
		t.Fatalf("mine.flush: %d %s", r.code, r.stderr)
	}
	waitFor(t, 10*time.Second, "m2's mine flushed", func() bool {
		got, _ := c.jsonOut("halite-run", "mine.get", "*", "test.ping")
		return jsonEq(got, `{"m1": true}`)
	})
}

func jsonEq(got map[string]any, want string) bool {
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		panic(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(w)
	return string(a) == string(b)
}
