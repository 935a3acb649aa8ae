package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// multimaster is a set of masters sharing one key, as the README's
// multimaster section sets them up, and agents that know them all.
type multimaster struct {
	t       *testing.T
	masters []*cluster
}

// newMultimaster makes n masters, each its own cluster (root, port, key
// store, job cache), with jid_node 1..n. Start them with start.
func newMultimaster(t *testing.T, n int, masterExtra string) *multimaster {
	t.Helper()
	f := &multimaster{t: t}
	for i := 0; i < n; i++ {
		c := newCluster(t, fmt.Sprintf("jid_node: %d\n%s", i+1, masterExtra))
		c.port = lowUDPPort(t)
		f.masters = append(f.masters, c)
	}
	t.Cleanup(func() {
		// A paused master cannot stop: let it go on before the clusters'
		// cleanups stop it.
		for _, m := range f.masters {
			if m.master != nil {
				m.master.cmd.Process.Signal(syscall.SIGCONT)
			}
		}
	})
	return f
}

// start starts the first master, copies its key to the others (the
// README's step: the masters share one identity) and starts them.
func (f *multimaster) start() {
	f.t.Helper()
	f.masters[0].startMaster()
	for _, m := range f.masters[1:] {
		f.shareKey(m)
		m.startMaster()
	}
}

func pkiDir(c *cluster) string {
	return filepath.Join(c.root, "master", "etc", "halite", "pki", "master")
}

func (f *multimaster) shareKey(m *cluster) {
	f.t.Helper()
	src, dst := pkiDir(f.masters[0]), pkiDir(m)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		f.t.Fatal(err)
	}
	for _, name := range []string{"master.pem", "master.pub"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			f.t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".pem") {
			mode = 0o600
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, mode); err != nil {
			f.t.Fatal(err)
		}
	}
}

// lowUDPPort returns a free UDP port on 127.0.0.1 below the kernel's
// ephemeral range: these masters are killed and started again while
// agents dial, and an agent's ephemeral socket must not take the port of
// a master that is down.
func lowUDPPort(t *testing.T) int {
	t.Helper()
	for try := 0; try < 200; try++ {
		port := 20000 + rand.IntN(12000)
		c, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		c.Close()
		return port
	}
	t.Fatal("no free UDP port from 20000 to 32000")
	return 0
}

// masterList is the agent's master option for the given addresses.
func masterList(addrs ...string) string {
	var b strings.Builder
	b.WriteString("master:\n")
	for _, a := range addrs {
		fmt.Fprintf(&b, "  - %s\n", a)
	}
	return b.String()
}

func (f *multimaster) addrs() []string {
	var out []string
	for _, m := range f.masters {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", m.port))
	}
	return out
}

// startAgent starts an agent that lists every master; its files live
// under the first master's cluster, which also stops it.
func (f *multimaster) startAgent(id, extra string) *proc {
	f.t.Helper()
	return f.startAgentWith(id, masterList(f.addrs()...)+extra, nil)
}

// startAgentWith starts an agent with the given master option and extra
// config; wrap, if not nil, is the command to run it under.
func (f *multimaster) startAgentWith(id, conf string, wrap []string) *proc {
	f.t.Helper()
	c := f.masters[0]
	dir := c.agentDir(id)
	if _, err := os.Stat(filepath.Join(dir, "agent")); err != nil {
		os.MkdirAll(dir, 0o755)
		full := fmt.Sprintf("id: %s\nroot_dir: %s\nacceptance_wait_time: 1\nrandom_reauth_delay: 1\nlog_file: ''\n%s",
			id, filepath.Join(c.root, id), conf)
		if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(full), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	args := []string{"-c", dir, "-l", "info"}
	var p *proc
	if wrap != nil {
		p = c.startRaw(wrap[0], append(append(wrap[1:], filepath.Join(binDir, "halite-agent")), args...)...)
	} else {
		p = c.start("halite-agent", args...)
	}
	c.agents[id] = p
	return p
}

func (f *multimaster) agentCacheDir(id string) string {
	return filepath.Join(f.masters[0].root, id, "var", "cache", "halite", "agent")
}

// asyncJob publishes a job with --async on c and returns its jid.
func asyncJob(t *testing.T, c *cluster, args ...string) string {
	t.Helper()
	r := c.cli("halite", append([]string{"--async"}, args...)...)
	jid := strings.TrimSpace(strings.TrimPrefix(r.stdout, "Executed command with job ID: "))
	if r.code != 0 || len(jid) != 20 {
		t.Fatalf("halite --async %v: exit %d, stdout %q, stderr %q; want a jid", args, r.code, r.stdout, r.stderr)
	}
	return jid
}

// waitRunning waits until n minions run jid (jobs.active).
func waitRunning(t *testing.T, c *cluster, jid string, n int) {
	t.Helper()
	waitFor(t, 20*time.Second, fmt.Sprintf("%d minions to run %s", n, jid), func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.active")
		j, _ := m[jid].(map[string]any)
		running, _ := j["Running"].([]any)
		return len(running) == n
	})
}

// returnsOf is jobs.lookup_jid on c: minion id → return.
func returnsOf(c *cluster, jid string) map[string]any {
	m, _ := c.jsonOut("halite-run", "jobs.lookup_jid", jid)
	return m
}

// waitActive waits until c's jobs.active lists jid.
func waitActive(t *testing.T, c *cluster, jid string) {
	t.Helper()
	waitFor(t, 20*time.Second, "the agents to run "+jid, func() bool {
		m, _ := c.jsonOut("halite-run", "jobs.active")
		_, ok := m[jid]
		return ok
	})
}

// pingAll waits until `halite '*' test.ping` on c answers for every id.
func pingAll(t *testing.T, c *cluster, d time.Duration, ids ...string) {
	t.Helper()
	var last result
	waitFor(t, d, fmt.Sprintf("%v to answer test.ping on %s", ids, c.masterDir()), func() bool {
		var rets map[string]any
		rets, last = c.jsonOut("halite", "-t", "3", "*", "test.ping")
		for _, id := range ids {
			if rets[id] != true {
				return false
			}
		}
		return last.code == 0
	})
}

// TestMultimasterHot: two hot masters. Each accepts the agents' keys on
// its own with halite-key; jobs from each master reach every agent and
// each return goes to the master that sent the job; an agent's event goes
// to both; job ids carry each master's jid_node; a master killed while
// its job runs gets that job's returns once it is back (the other master
// is not given them, and serves its own jobs meanwhile).
func TestMultimasterHot(t *testing.T) {
	f := newMultimaster(t, 2, "event_return: rawfile_json\nrawfile_json.filename: EVENTS\n")
	for _, m := range f.masters {
		m.extra = strings.Replace(m.extra, "EVENTS", filepath.Join(m.root, "events.json"), 1)
	}
	f.start()
	ids := []string{"h1", "h2"}
	for _, id := range ids {
		f.startAgent(id, "")
	}
	for _, m := range f.masters {
		m.acceptAll(ids...)
	}

	jids := make([]string, len(f.masters))
	for i, m := range f.masters {
		jids[i] = asyncJob(t, m, "*", "test.echo", fmt.Sprint("from-", i))
		if want := fmt.Sprintf("%03d", i+1); !strings.HasSuffix(jids[i], want) {
			t.Errorf("master %d made jid %s, want it to end with its jid_node %s", i, jids[i], want)
		}
	}
	if jids[0] == jids[1] {
		t.Fatalf("both masters made jid %s", jids[0])
	}
	for i, m := range f.masters {
		waitFor(t, 20*time.Second, "returns of "+jids[i], func() bool { return len(returnsOf(m, jids[i])) == 2 })
		if got := returnsOf(m, jids[i]); got["h1"] != fmt.Sprint("from-", i) {
			t.Errorf("master %d: return of h1 is %v, want from-%d", i, got["h1"], i)
		}
		if other := returnsOf(f.masters[1-i], jids[i]); len(other) != 0 {
			t.Errorf("master %d got returns of master %d's job %s: %v", 1-i, i, jids[i], other)
		}
	}

	// An event from a device goes to every master.
	if r := runCmd(t, "halite-call", "-c", f.masters[0].agentDir("h1"), "event.send", "hot/evt", `{"n": 7}`); r.code != 0 {
		t.Fatalf("halite-call event.send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for i, m := range f.masters {
		path := filepath.Join(m.root, "events.json")
		waitFor(t, 20*time.Second, fmt.Sprintf("hot/evt in master %d's event_return", i), func() bool {
			b, _ := os.ReadFile(path)
			return bytes.Contains(b, []byte(`"hot/evt"`))
		})
	}

	// Master 0 dies (SIGKILL) while its job runs.
	jid := asyncJob(t, f.masters[0], "*", "test.sleep", "3")
	waitActive(t, f.masters[0], jid)
	f.masters[0].kill(f.masters[0].master)
	// Master 1 serves its own jobs meanwhile.
	pingAll(t, f.masters[1], 30*time.Second, ids...)
	// The returns wait on the agents' disks, in master 0's outbox.
	for _, id := range ids {
		spool := filepath.Join(f.agentCacheDir(id), "spool", "master-"+strings.ReplaceAll(f.addrs()[0], ":", "_"), "outbox.log")
		waitFor(t, 20*time.Second, id+"'s return in master 0's outbox", func() bool {
			b, _ := os.ReadFile(spool)
			return bytes.Contains(b, []byte(jid))
		})
	}
	f.masters[0].startMaster()
	waitFor(t, 60*time.Second, "the returns of "+jid+" on master 0 once it is back", func() bool {
		return len(returnsOf(f.masters[0], jid)) == 2
	})
	if other := returnsOf(f.masters[1], jid); len(other) != 0 {
		t.Errorf("master 1 got the returns of master 0's job: %v", other)
	}
	pingAll(t, f.masters[0], 30*time.Second, ids...)
}

// TestMultimasterFailover: three masters, failover. The agents join the
// first; it is killed (SIGKILL) while a job runs: they fail over to the
// second, deliver the job's returns there, and the job is not run twice;
// the CLI that waited on the dead master says what happened. The first
// comes back: they fail back. It is paused (SIGSTOP): they fail over, and
// back once it goes on. Every master dies: the returns wait on disk and
// reach the one master that comes back (the third, never used before).
func TestMultimasterFailover(t *testing.T) {
	f := newMultimaster(t, 3, "auto_accept: True\n")
	f.start()
	ids := []string{"f1", "f2"}
	conf := "master_type: failover\nmaster_alive_interval: 2\nmaster_failback: True\nmaster_failback_interval: 2\n"
	for _, id := range ids {
		f.startAgent(id, conf)
	}
	m0, m1, m2 := f.masters[0], f.masters[1], f.masters[2]
	m0.waitUp(ids...)
	pingAll(t, m0, 30*time.Second, ids...)

	// (a) SIGKILL of the active master while a job runs, with the CLI
	// waiting on it.
	runs := filepath.Join(t.TempDir(), "runs")
	type cliResult struct {
		r   result
		err error
	}
	cliDone := make(chan cliResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "halite"), "-c", m0.masterDir(), "-t", "30", "*", "cmd.run",
			fmt.Sprintf("echo ran >> %s; sleep 3; echo done", runs))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code, err = ee.ExitCode(), nil
		}
		cliDone <- cliResult{result{out.String(), errb.String(), code}, err}
	}()
	var jid string
	waitFor(t, 20*time.Second, "the cmd.run job to run", func() bool {
		m, _ := m0.jsonOut("halite-run", "jobs.active")
		for k := range m {
			jid = k
		}
		return jid != ""
	})
	waitFor(t, 20*time.Second, "both agents to start the job", func() bool {
		b, _ := os.ReadFile(runs)
		return bytes.Count(b, []byte("ran\n")) == 2
	})
	m0.kill(m0.master)
	select {
	case cr := <-cliDone:
		if cr.err != nil {
			t.Fatalf("halite: %v", cr.err)
		}
		if cr.r.code != 1 || !strings.Contains(cr.r.stderr, "the master stopped answering") ||
			!strings.Contains(cr.r.stderr, "halite-run jobs.lookup_jid "+jid) {
			t.Errorf("halite waiting on the killed master: exit %d, stderr %q; want 1 and a message naming the job", cr.r.code, cr.r.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("halite still waits 30s after its master was killed")
	}
	m1.waitUp(ids...)
	waitFor(t, 30*time.Second, "the returns of "+jid+" on the master failed over to", func() bool {
		return len(returnsOf(m1, jid)) == 2
	})
	if got := returnsOf(m1, jid); got["f1"] != "done" {
		t.Errorf("return of f1 on master 1: %v, want done", got["f1"])
	}
	if b, _ := os.ReadFile(runs); bytes.Count(b, []byte("ran\n")) != 2 {
		t.Errorf("the job ran %d times on 2 agents, want 2:\n%s", bytes.Count(b, []byte("ran\n")), b)
	}
	pingAll(t, m1, 30*time.Second, ids...)

	// (b) Failback once the first master is back.
	m0.startMaster()
	pingAll(t, m0, 60*time.Second, ids...)
	for _, id := range ids {
		if !strings.Contains(f.agentOutput(id), "failing back to the first master") {
			t.Errorf("agent %s did not log its failback", id)
		}
	}

	// (c) The first master paused (SIGSTOP) rather than dead.
	if err := m0.master.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pingAll(t, m1, 60*time.Second, ids...)
	if err := m0.master.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	pingAll(t, m0, 60*time.Second, ids...)

	// (d) Every master dies while a job runs; one (never used before)
	// comes back and gets the returns.
	jid = asyncJob(t, m0, "*", "test.sleep", "2")
	waitActive(t, m0, jid)
	m0.kill(m0.master)
	m1.kill(m1.master)
	m2.kill(m2.master)
	for _, id := range ids {
		spool := filepath.Join(f.agentCacheDir(id), "spool", "outbox.log")
		waitFor(t, 30*time.Second, id+"'s return in its outbox", func() bool {
			b, _ := os.ReadFile(spool)
			return bytes.Contains(b, []byte(jid))
		})
	}
	m2.startMaster()
	waitFor(t, 90*time.Second, "the returns of "+jid+" on the master that came back", func() bool {
		return len(returnsOf(m2, jid)) == 2
	})
}

func (f *multimaster) agentOutput(id string) string {
	return f.masters[0].agents[id].output()
}

// netns makes a network namespace for the test, deleted at its end; ok is
// false (and why says why) where the machine refuses it.
func netns(t *testing.T, name string) (ok bool, why string) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return false, fmt.Sprintf("ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return true, ""
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// TestMultimasterPartition: the first master sits in a network namespace
// of its own, joined to the agent's by a veth pair; the second shares the
// agent's namespace. The link is cut while a job runs: the agent fails
// over and delivers the return to the second master; the link comes back:
// it fails back. Then, where tc netem is available, the link gets loss
// and delay and jobs still complete on the first master.
func TestMultimasterPartition(t *testing.T) {
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	nsA, nsB := "hlmA"+tag, "hlmB"+tag
	vA, vB := "hva"+tag, "hvb"+tag
	if ok, why := netns(t, nsA); !ok {
		t.Skipf("network namespaces are refused on this machine (%s); the partition test needs them", why)
	}
	if ok, why := netns(t, nsB); !ok {
		t.Skipf("network namespaces are refused on this machine (%s); the partition test needs them", why)
	}
	ipCmd(t, "link", "add", vA, "netns", nsA, "type", "veth", "peer", "name", vB, "netns", nsB)
	ipCmd(t, "-n", nsA, "addr", "add", "10.231.0.1/24", "dev", vA)
	ipCmd(t, "-n", nsB, "addr", "add", "10.231.0.2/24", "dev", vB)
	for _, a := range [][]string{{nsA, vA}, {nsA, "lo"}, {nsB, vB}, {nsB, "lo"}} {
		ipCmd(t, "-n", a[0], "link", "set", a[1], "up")
	}

	f := newMultimaster(t, 2, "auto_accept: True\n")
	m0, m1 := f.masters[0], f.masters[1]
	m0.iface, m0.netns = "10.231.0.1", nsA
	m1.netns = nsB
	f.start()
	conf := masterList(fmt.Sprintf("10.231.0.1:%d", m0.port), fmt.Sprintf("127.0.0.1:%d", m1.port)) +
		"master_type: failover\nmaster_alive_interval: 2\nmaster_failback: True\nmaster_failback_interval: 2\n"
	f.startAgentWith("p1", conf, []string{"/usr/sbin/ip", "netns", "exec", nsB})
	pingAll(t, m0, 60*time.Second, "p1")

	jid := asyncJob(t, m0, "p1", "test.sleep", "3")
	waitActive(t, m0, jid)
	ipCmd(t, "-n", nsA, "link", "set", vA, "down")
	pingAll(t, m1, 60*time.Second, "p1")
	waitFor(t, 30*time.Second, "the return of "+jid+" on the second master", func() bool {
		return len(returnsOf(m1, jid)) == 1
	})
	ipCmd(t, "-n", nsA, "link", "set", vA, "up")
	pingAll(t, m0, 60*time.Second, "p1")

	t.Run("netem", func(t *testing.T) {
		out, err := exec.Command("ip", "netns", "exec", nsA, "tc", "qdisc", "add", "dev", vA, "root", "netem",
			"delay", "100ms", "20ms", "loss", "10%").CombinedOutput()
		if err != nil {
			t.Skipf("tc netem is refused on this machine (%v: %s): the loss-and-delay case is skipped; the partition case ran",
				err, bytes.TrimSpace(out))
		}
		for i := 0; i < 5; i++ {
			rets, r := m0.jsonOut("halite", "-t", "20", "p1", "test.echo", fmt.Sprint(i))
			if r.code != 0 || rets["p1"] != fmt.Sprint(i) {
				t.Errorf("job %d over a lossy, slow link: exit %d, %v, stderr %s", i, r.code, rets, r.stderr)
			}
		}
	})
}
