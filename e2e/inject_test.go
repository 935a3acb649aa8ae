package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReactorInjection: a device's event value cannot add reactions. The
// reactor file interpolates event data as Salt's reactor docs do
// (- text: {{ data['data']['door'] }}); an agent sends a value holding a
// newline and YAML for a cmd.run on '*'. The master must publish the one
// test.echo reaction with the whole hostile string as its text, and no
// cmd.run. Then an alias bomb as an event value is a string too, with
// the master's memory bounded; and a reaction whose job would be larger
// than a device can read is refused and logged, not stored.
func TestReactorInjection(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv", "reactor")
	os.MkdirAll(srv, 0o755)
	marker := filepath.Join(root, "pwned")
	files := map[string]string{
		"door.sls": `door_event:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - args:
      - text: {{ data['data']['door'] }}
`,
		// Repeats the value to a job larger than a device reads.
		"big.sls": `big_event:
  local.test.echo:
    - tgt: {{ data['id'] }}
    - args:
      - text: "{% for i in range(60) %}{{ data['data']['blob'] }}{% endfor %}"
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(srv, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCluster(t, `reactor:
  - 'myco/door':
    - `+filepath.Join(srv, "door.sls")+`
  - 'myco/big':
    - `+filepath.Join(srv, "big.sls")+`
`)
	c.startMaster()
	c.startAgent("cam1", "")
	c.acceptAll("cam1")

	send := func(tag string, data map[string]any) {
		t.Helper()
		b, _ := json.Marshal(data)
		if r := runCmd(t, "halite-call", "-c", c.agentDir("cam1"), "event.send", tag, string(b)); r.code != 0 {
			t.Fatalf("event.send %s: exit %d %s", tag, r.code, r.stderr)
		}
	}
	// echoJob waits for the test.echo job whose return is want and
	// checks that no job but test.echo was ever published.
	echoJob := func(want string) {
		t.Helper()
		waitFor(t, 30*time.Second, "the test.echo reaction's return", func() bool {
			jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
			for jid, j := range jobs {
				if m, _ := j.(map[string]any); m["Function"] != "test.echo" {
					continue
				}
				rets, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
				if rets["cam1"] == want {
					return true
				}
			}
			return false
		})
		jobs, _ := c.jsonOut("halite-run", "jobs.list_jobs")
		for jid, j := range jobs {
			if m, _ := j.(map[string]any); m["Function"] != "test.echo" {
				t.Errorf("job %s: %v, want test.echo jobs only", jid, m)
			}
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s exists: the injected cmd.run ran", marker)
		}
	}

	hostile := "open\ninjected:\n  local.cmd.run:\n    - tgt: '*'\n    - args:\n      - cmd: touch " + marker
	send("myco/door", map[string]any{"door": hostile})
	echoJob(hostile)

	// An alias bomb as the value (270 bytes that Salt's way of pasting
	// expands to billions of nodes) is one string.
	bomb := "x\nbomb:\n  a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n" +
		"  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n" +
		"  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]"
	send("myco/door", map[string]any{"door": bomb})
	echoJob(bomb)
	if hwm := peakRSS(t, c.master.cmd.Process.Pid); hwm > 400<<20 {
		t.Errorf("master peak memory %d MiB, want under 400 MiB", hwm>>20)
	}

	// A job over a frame is refused at publish and logged; nothing is
	// stored for it.
	before, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	send("myco/big", map[string]any{"blob": strings.Repeat("0123456789abcdef", 100_000/16)})
	waitFor(t, 30*time.Second, "the big reaction refused in the master's log", func() bool {
		return strings.Contains(c.master.output(), "job refused")
	})
	after, _ := c.jsonOut("halite-run", "jobs.list_jobs")
	if len(after) != len(before) {
		t.Errorf("jobs.list_jobs: %d jobs after the refused one, want %d", len(after), len(before))
	}
}

// peakRSS is a process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
