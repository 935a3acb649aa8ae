// Command failoverbench measures multimaster failover and failback with
// real masters and real agents: two halite-master processes on loopback
// sharing one key (auto_accept), and N agents in this process (package
// agent, the code halite-agent runs, each with its own key, spool, local
// socket and QUIC connection) in failover mode with master_failback.
//
// Failover: while a test.sleep job from the first master runs on every
// agent, the first master is killed (SIGKILL); measured per agent is the
// time from the kill to its session on the second master, then the time
// until every agent answers test.ping there, and how many of the
// test.sleep returns never reached it (lost). Failback: while a test.sleep
// job from the second master runs, the first master comes back; measured
// is the time from its start (the command) to each agent's session on it,
// until every agent answers test.ping there, and returns of the second job
// found on neither master.
//
//	failoverbench -bin bin -n 1000 -alive 5
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
)

type options struct {
	bin     string
	n       int
	alive   int
	sleep   int
	timeout time.Duration

	preaccept  bool
	agentLog   string
	cpuprofile string
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding halite-master")
	flag.IntVar(&o.n, "n", 1000, "agents")
	flag.IntVar(&o.alive, "alive", 5, "master_alive_interval and master_failback_interval, seconds")
	flag.IntVar(&o.sleep, "sleep", 3, "seconds of the test.sleep job running across the kill and the failback")
	flag.BoolVar(&o.preaccept, "preaccept", true, "accept the agents' keys on the second master before it starts (false: its auto_accept does, during the failover)")
	flag.StringVar(&o.agentLog, "agentlog", "", "write the agents' logs (info) to this file")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of this process (the agents) from the kill to the last agent on the second master")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.Parse()
	if o.n <= 0 || o.alive <= 0 || o.sleep <= 0 {
		fmt.Fprintln(os.Stderr, "failoverbench: -n, -alive and -sleep must be positive")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	err := run(ctx, o)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "failoverbench:", err)
		os.Exit(1)
	}
}

// masterProc is one halite-master process.
type masterProc struct {
	name, dir, root, sock string
	port                  int
	cmd                   *exec.Cmd
	done                  chan struct{}
}

// freeUDPPort returns a free UDP port on 127.0.0.1 below the kernel's
// ephemeral range (32768 and up): a thousand agents dialling open a
// thousand ephemeral sockets, and one could take the port of the master
// that was killed before it comes back.
func freeUDPPort() (int, error) {
	for try := 0; try < 100; try++ {
		port := 20000 + rand.IntN(12000)
		c, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		c.Close()
		return port, nil
	}
	return 0, errors.New("no free UDP port from 20000 to 32000")
}

func newMaster(base, name string, node int) (*masterProc, error) {
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	m := &masterProc{name: name, dir: filepath.Join(base, "etc", name), root: filepath.Join(base, name), port: port}
	m.sock = filepath.Join(m.root, "var", "run", "halite", "master", "master.sock")
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("root_dir: %s\ninterface: 127.0.0.1\nport: %d\nauto_accept: True\nnew_keys_per_address: 0\njid_node: %d\nlog_file: %s\nlog_level_logfile: warning\ntimeout: 60\n",
		m.root, port, node, filepath.Join(base, name+".log"))
	return m, os.WriteFile(filepath.Join(m.dir, "master"), []byte(conf), 0o644)
}

func (m *masterProc) start(ctx context.Context, bin string) error {
	m.cmd = exec.Command(filepath.Join(bin, "halite-master"), "-c", m.dir, "-l", "error")
	m.cmd.Stdout, m.cmd.Stderr = os.Stderr, os.Stderr
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	m.done = make(chan struct{})
	go func() {
		m.cmd.Wait()
		close(m.done)
	}()
	return waitUntil(ctx, 30*time.Second, m.name+" socket", func() bool {
		select {
		case <-m.done:
			return false
		default:
		}
		c, err := net.Dial("unix", m.sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (m *masterProc) kill() {
	if m.cmd != nil && m.cmd.Process != nil {
		m.cmd.Process.Kill()
		<-m.done
	}
}

func (m *masterProc) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	select {
	case <-m.done:
		return
	default:
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		m.kill()
	}
}

func (m *masterProc) addr() string { return fmt.Sprintf("127.0.0.1:%d", m.port) }

// waitUntil polls cond every 20 ms until it holds, d passes or ctx ends.
func waitUntil(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// tracker records, per agent, when it last joined and left each master.
type tracker struct {
	mu     sync.Mutex
	joined []map[string]time.Time
	left   []map[string]time.Time
}

func (t *tracker) set(i int, tag, master string, at time.Time) {
	t.mu.Lock()
	if tag == "__master_connected" {
		t.joined[i][master] = at
	} else {
		t.left[i][master] = at
	}
	t.mu.Unlock()
}

// leftSince returns how long after t0 each agent that left master after
// t0 did.
func (t *tracker) leftSince(master string, t0 time.Time) (d []time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.left {
		if at, ok := l[master]; ok && at.After(t0) {
			d = append(d, at.Sub(t0))
		}
	}
	return d
}

// since returns, for every agent that joined master after t0, how long
// after t0 it did; missing counts the others.
func (t *tracker) since(master string, t0 time.Time) (d []time.Duration, missing int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range t.joined {
		if at, ok := j[master]; ok && at.After(t0) {
			d = append(d, at.Sub(t0))
		} else {
			missing++
		}
	}
	return d, missing
}

func run(ctx context.Context, o options) error {
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil && lim.Cur < lim.Max {
		lim.Cur = lim.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	base, err := os.MkdirTemp("", "hfb")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)

	ma, err := newMaster(base, "ma", 1)
	if err != nil {
		return err
	}
	mb, err := newMaster(base, "mb", 2)
	if err != nil {
		return err
	}
	defer mb.stop()
	defer ma.stop()
	if err := ma.start(ctx, o.bin); err != nil {
		return err
	}
	alog := zap.NewNop()
	if o.agentLog != "" {
		zc := zap.NewProductionConfig()
		zc.OutputPaths = []string{o.agentLog}
		zc.Sampling = nil
		if alog, err = zc.Build(); err != nil {
			return err
		}
		defer alog.Sync()
	}
	tr := &tracker{joined: make([]map[string]time.Time, o.n), left: make([]map[string]time.Time, o.n)}
	agents := make([]*agent.Agent, o.n)
	ids := make([]string, o.n)
	for i := range agents {
		tr.joined[i], tr.left[i] = map[string]time.Time{}, map[string]time.Time{}
		cfg := config.DefaultAgent()
		cfg.ID = fmt.Sprintf("fo-%05d", i)
		ids[i] = cfg.ID
		dir := filepath.Join(base, "a", fmt.Sprint(i))
		cfg.RootDir, cfg.PkiDir, cfg.CacheDir = dir, filepath.Join(dir, "pki"), filepath.Join(dir, "cache")
		cfg.SockDir = filepath.Join(base, "s", fmt.Sprint(i))
		cfg.LogFile = ""
		cfg.Master = []string{ma.addr(), mb.addr()}
		cfg.MasterType = "failover"
		cfg.MasterAliveInterval, cfg.MasterFailback, cfg.MasterFailbackInterval = o.alive, true, o.alive
		cfg.RandomReauthDelay, cfg.AcceptanceWaitTime = 1, 1
		a, err := agent.New(cfg, alog.With(zap.String("agent", cfg.ID)))
		if err != nil {
			return fmt.Errorf("agent %d: %w", i, err)
		}
		agents[i] = a
	}
	actx, stopAgents := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		stopAgents()
		wg.Wait()
	}()
	for i, a := range agents {
		sub := a.Subscribe("__master_*connected", 64)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				select {
				case <-actx.Done():
					return
				case ev, ok := <-sub.C():
					if !ok {
						return
					}
					if m, _ := ev.Data["master"].(string); m != "" {
						tr.set(i, ev.Tag, m, time.Now())
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			if err := a.Run(actx); err != nil {
				fmt.Fprintf(os.Stderr, "failoverbench: agent %d: %v\n", i, err)
			}
		}()
	}
	t0 := time.Now()
	if err := waitUntil(ctx, 3*time.Minute, "every agent on the first master", func() bool {
		_, missing := tr.since(ma.addr(), t0.Add(-time.Hour))
		return missing == 0
	}); err != nil {
		return err
	}
	fmt.Printf("failoverbench: %d agents (failover, master_alive_interval=%d, master_failback_interval=%d) joined the first master in %s\n",
		o.n, o.alive, o.alive, time.Since(t0).Round(time.Millisecond))
	if _, err := pingAll(ctx, ma.sock, o.n, 10); err != nil {
		return fmt.Errorf("test.ping on the first master: %w", err)
	}
	// The README's step: the second master gets the first one's key.
	pkiA := filepath.Join(ma.root, "etc", "halite", "pki", "master")
	pkiB := filepath.Join(mb.root, "etc", "halite", "pki", "master")
	if err := os.MkdirAll(pkiB, 0o700); err != nil {
		return err
	}
	files := []string{"master.pem", "master.pub"}
	if o.preaccept {
		// The agents' keys too, as accepted on the first master: the
		// README's "accept the keys on every master".
		acc, _ := filepath.Glob(filepath.Join(pkiA, "minions", "*"))
		if err := os.MkdirAll(filepath.Join(pkiB, "minions"), 0o700); err != nil {
			return err
		}
		for _, p := range acc {
			files = append(files, filepath.Join("minions", filepath.Base(p)))
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(pkiA, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(pkiB, f), b, 0o600); err != nil {
			return err
		}
	}
	if err := mb.start(ctx, o.bin); err != nil {
		return err
	}

	fmt.Println()
	fmt.Println("| phase | agents | p50 | p90 | p99 | max | every agent answers test.ping | returns lost |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")

	// Failover: kill the first master while a job from it runs.
	jid, err := publishAsync(ctx, ma.sock, fmt.Sprint(o.sleep))
	if err != nil {
		return err
	}
	// The job reaches every agent within a few hundred milliseconds (see
	// fleetsim); half its run is left when the master dies.
	time.Sleep(time.Duration(o.sleep) * time.Second / 2)
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer f.Close()
	}
	cpuB0, cpuSelf0 := procCPU(mb.cmd.Process.Pid), selfCPU()
	kill := time.Now()
	ma.kill()
	if err := waitUntil(ctx, 3*time.Minute, "every agent on the second master", func() bool {
		_, missing := tr.since(mb.addr(), kill)
		return missing == 0
	}); err != nil {
		d, _ := tr.since(mb.addr(), kill)
		fmt.Printf("| failover | %d of %d | … | | | | | |\n", len(d), o.n)
		return err
	}
	cpuB, cpuSelf := procCPU(mb.cmd.Process.Pid)-cpuB0, selfCPU()-cpuSelf0
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	pingDone, err := pingAll(ctx, mb.sock, o.n, 10)
	if err != nil {
		return fmt.Errorf("test.ping on the second master: %w", err)
	}
	lost := countLost(ctx, []string{mb.sock}, jid, ids, 60*time.Second)
	d, _ := tr.since(mb.addr(), kill)
	row("failover (SIGKILL of the active master)", d, pingDone.Sub(kill), lost)
	row("of which: the kill → the agent gives the dead master up", tr.leftSince(ma.addr(), kill), 0, -1)

	// Failback: the first master comes back while a job from the second
	// one runs.
	jid, err = publishAsync(ctx, mb.sock, fmt.Sprint(o.sleep))
	if err != nil {
		return err
	}
	// Measured from the command that starts it: agents may join it the
	// moment it listens, before its socket is seen.
	back := time.Now()
	if err := ma.start(ctx, o.bin); err != nil {
		return err
	}
	if err := waitUntil(ctx, 3*time.Minute, "every agent back on the first master", func() bool {
		_, missing := tr.since(ma.addr(), back)
		return missing == 0
	}); err != nil {
		return err
	}
	pingDone, err = pingAll(ctx, ma.sock, o.n, 10)
	if err != nil {
		return fmt.Errorf("test.ping on the first master after failback: %w", err)
	}
	lost = countLost(ctx, []string{ma.sock, mb.sock}, jid, ids, 60*time.Second)
	d, _ = tr.since(ma.addr(), back)
	row("failback (first master back)", d, pingDone.Sub(back), lost)
	fmt.Printf("\nCPU from the kill to the last agent on the second master: second master %.2f s, the %d agents (this process) %.2f s; load average %s\n",
		cpuB.Seconds(), o.n, cpuSelf.Seconds(), loadavg())
	fmt.Printf("goal: failover p99 ≤ master_alive_interval + 2 s = %d s; returns lost 0\n", o.alive+2)
	return nil
}

func row(phase string, d []time.Duration, all time.Duration, lost int) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	q := func(p float64) string {
		if len(d) == 0 {
			return "—"
		}
		i := int(p*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return fmt.Sprintf("%.2f s", d[i].Seconds())
	}
	allS, lostS := fmt.Sprintf("%.2f s", all.Seconds()), fmt.Sprint(lost)
	if lost < 0 {
		allS, lostS = "", ""
	}
	fmt.Printf("| %s | %d | %s | %s | %s | %s | %s | %s |\n", phase, len(d), q(0.50), q(0.90), q(0.99), q(1), allS, lostS)
}

// publishAsync publishes test.sleep to every agent and returns the jid.
func publishAsync(ctx context.Context, sock, secs string) (string, error) {
	c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: "*", Fun: "test.sleep", Arg: []any{secs}, Async: true})
	if err != nil {
		return "", err
	}
	defer c.Close()
	r, err := c.Next()
	if err != nil {
		return "", err
	}
	if r.Kind != api.KindJob {
		return "", fmt.Errorf("publish test.sleep: %s %s", r.Kind, r.Error)
	}
	return r.JID, nil
}

// pingAll runs test.ping on every agent until all n answer in one round
// (agents whose session is not up yet miss a round), and returns when
// the last return of that round arrived.
func pingAll(ctx context.Context, sock string, n int, timeout float64) (time.Time, error) {
	var last error
	for try := 0; try < 20; try++ {
		c, err := api.Dial(ctx, sock, &api.Request{Op: api.OpPublish, Tgt: "*", Fun: "test.ping", Timeout: timeout})
		if err != nil {
			return time.Time{}, err
		}
		got := 0
		var at time.Time
		for {
			r, err := c.Next()
			if err != nil {
				last = err
				break
			}
			if r.Kind == api.KindReturn {
				got++
				at = time.Now()
			}
			if r.Kind == api.KindError {
				last = errors.New(r.Error)
				break
			}
			if r.Done {
				break
			}
		}
		c.Close()
		if got == n {
			return at, nil
		}
		if last == nil {
			last = fmt.Errorf("%d of %d answered", got, n)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return time.Time{}, last
}

// countLost waits up to d for every agent's return of jid on the masters
// at socks (together) and returns how many are on none.
func countLost(ctx context.Context, socks []string, jid string, ids []string, d time.Duration) int {
	missing := len(ids)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		have := map[string]bool{}
		for _, s := range socks {
			res, err := api.Call(ctx, s, &api.Request{Op: api.OpRunner, Fun: "jobs.lookup_jid", Arg: []any{jid}})
			if m, ok := res.(map[string]any); err == nil && ok {
				for id := range m {
					have[id] = true
				}
			}
		}
		missing = 0
		for _, id := range ids {
			if !have[id] {
				missing++
			}
		}
		if missing == 0 {
			return 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	return missing
}

// procCPU is the user+system CPU time a process has used (Linux /proc).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which is in parentheses and may hold
	// spaces): state is the 3rd field, utime the 14th, stime the 15th.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
