package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Goals from the issue, compared against in the output.
const (
	goalPingP50  = 50 * time.Millisecond
	goalAgentRSS = 12 << 20 // bytes, median idle agent
)

// maxSockPath is the longest unix socket path Linux accepts (sun_path is
// 108 bytes with the terminating NUL).
const maxSockPath = 107

type options struct {
	bin     string
	n       int
	runs    int
	warmup  int
	idle    time.Duration
	timeout time.Duration
	reactor int // events per round through the reactor (0: the test.ping runs)
	fire    int // event.send connections at a time
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory holding the binaries `make build` made")
	flag.IntVar(&o.n, "n", 100, "agents to start")
	flag.IntVar(&o.runs, "runs", 20, "measured runs of halite '*' test.ping")
	flag.IntVar(&o.warmup, "warmup", 1, "unmeasured runs first")
	flag.DurationVar(&o.idle, "idle", 10*time.Second, "idle time before reading agents' RSS")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "deadline for the whole run")
	flag.IntVar(&o.reactor, "reactor", 0, "instead of test.ping: fire this many events per run through the reactor (see reactor.go)")
	flag.IntVar(&o.fire, "fire", 16, "with -reactor: event.send connections at a time")
	flag.Parse()
	if o.n <= 0 || o.runs <= 0 || o.warmup < 0 || o.idle < 0 || o.timeout <= 0 || o.reactor < 0 || o.fire <= 0 {
		fmt.Fprintln(os.Stderr, "procbench: -n, -runs and -fire must be positive; -warmup, -idle, -reactor not negative; -timeout positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "procbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return fmt.Errorf("bin dir %s: %w", o.bin, err)
	}
	for _, name := range []string{"halite-master", "halite-agent", "halite", "halite-run"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return fmt.Errorf("find binary (run make build first): %w", err)
		}
	}
	// A short root keeps unix socket paths well under the limit.
	root, err := os.MkdirTemp("", "hpb")
	if err != nil {
		return fmt.Errorf("make root dir: %w", err)
	}
	defer os.RemoveAll(root)
	procs := &group{logDir: filepath.Join(root, "log")}
	if err := os.MkdirAll(procs.logDir, 0o755); err != nil {
		return fmt.Errorf("make log dir: %w", err)
	}
	// Runs before RemoveAll: stop every process we started.
	defer procs.stopAll(10 * time.Second)
	defer func() {
		if err != nil {
			if tail := procs.logTail("master", 2048); tail != "" {
				fmt.Fprintf(os.Stderr, "procbench: master log (tail):\n%s\n", tail)
			}
		}
	}()

	port, err := freeUDPPort()
	if err != nil {
		return err
	}
	masterDir := filepath.Join(root, "etc", "master")
	masterRoot := filepath.Join(root, "m")
	sock := filepath.Join(masterRoot, "var", "run", "halite", "master", "master.sock")
	if len(sock) > maxSockPath {
		return fmt.Errorf("master socket path %s is %d bytes, over %d: set TMPDIR to a shorter directory", sock, len(sock), maxSockPath)
	}
	conf := fmt.Sprintf("root_dir: %s\ninterface: 127.0.0.1\nport: %d\nauto_accept: True\nlog_level: warning\nlog_file: ''\ntimeout: 10\n",
		masterRoot, port)
	if o.reactor > 0 {
		rc, err := writeReactorFile(root)
		if err != nil {
			return err
		}
		conf += rc
	}
	if err := writeConfig(masterDir, "master", conf); err != nil {
		return err
	}
	master, err := procs.start("master", filepath.Join(bin, "halite-master"), "-c", masterDir)
	if err != nil {
		return err
	}
	err = waitFor(ctx, 20*time.Second, "the master's socket", func() (bool, error) {
		if master.exited() {
			return false, errors.New("master exited")
		}
		c, err := net.Dial("unix", sock)
		if err != nil {
			return false, nil
		}
		c.Close()
		return true, nil
	})
	if err != nil {
		return err
	}

	ids := make([]string, o.n)
	agents := make([]*proc, o.n)
	start := time.Now()
	for i := range ids {
		ids[i] = fmt.Sprintf("a%04d", i)
		dir := filepath.Join(root, "etc", ids[i])
		aroot := filepath.Join(root, ids[i])
		// sock_dir is relocated under root_dir: <root>/aNNNN/s/agent.sock.
		if p := filepath.Join(aroot, "s", "agent.sock"); len(p) > maxSockPath {
			return fmt.Errorf("agent socket path %s is %d bytes, over %d", p, len(p), maxSockPath)
		}
		conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster: 127.0.0.1\nmaster_port: %d\nacceptance_wait_time: 1\nsock_dir: /s\nlog_level: warning\nlog_file: ''\n",
			ids[i], aroot, port)
		if err := writeConfig(dir, "agent", conf); err != nil {
			return err
		}
		if agents[i], err = procs.start(ids[i], filepath.Join(bin, "halite-agent"), "-c", dir); err != nil {
			return err
		}
	}
	err = waitFor(ctx, 90*time.Second, fmt.Sprintf("manage.up to list all %d agents", o.n), func() (bool, error) {
		if master.exited() {
			return false, errors.New("master exited")
		}
		out, err := runCLI(ctx, 10*time.Second, filepath.Join(bin, "halite-run"), "-c", masterDir, "manage.up", "--out", "json")
		if err != nil {
			return false, nil
		}
		var up []string
		if json.Unmarshal(out, &up) != nil {
			return false, nil
		}
		return len(up) >= o.n, nil
	})
	if err != nil {
		return err
	}
	upIn := time.Since(start)

	if o.reactor > 0 {
		cpu := func() (m, a time.Duration) {
			m, _ = cpuTime(master.pid())
			for _, p := range agents {
				d, _ := cpuTime(p.pid())
				a += d
			}
			return m, a
		}
		rounds, err := runReactor(ctx, o, sock, ids, cpu)
		if err != nil {
			return err
		}
		fmt.Printf("procbench: %d halite-agent processes and a halite-master on loopback, GOMAXPROCS=%d, %d CPUs; all up (manage.up) %s after start\n\n",
			o.n, runtime.GOMAXPROCS(0), runtime.NumCPU(), upIn.Round(10*time.Millisecond))
		printReactor(o, rounds)
		return nil
	}

	var times []time.Duration
	for r := 0; r < o.warmup+o.runs; r++ {
		t0 := time.Now()
		out, err := runCLI(ctx, 30*time.Second, filepath.Join(bin, "halite"), "-c", masterDir, "*", "test.ping")
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("run %d of halite '*' test.ping: %w", r, err)
		}
		if missing := missingIDs(string(out), ids); len(missing) > 0 {
			return fmt.Errorf("run %d of halite '*' test.ping: no return from %d agents (first %s)", r, len(missing), missing[0])
		}
		if r >= o.warmup {
			times = append(times, d)
		}
	}

	// Idle: nothing asked of the fleet but its keepalives.
	select {
	case <-time.After(o.idle):
	case <-ctx.Done():
		return fmt.Errorf("idle wait: %w", ctx.Err())
	}
	var rss, hwm []float64
	for i, a := range agents {
		if a.exited() {
			return fmt.Errorf("agent %s exited during the run", ids[i])
		}
		st, err := readMem(a.pid())
		if err != nil {
			return err
		}
		rss = append(rss, st.rss)
		hwm = append(hwm, st.hwm)
	}
	mst, err := readMem(master.pid())
	if err != nil {
		return err
	}

	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("procbench: %d halite-agent processes and a halite-master on loopback, GOMAXPROCS=%d, %d CPUs; all up (manage.up) %s after start\n\n",
		o.n, runtime.GOMAXPROCS(0), runtime.NumCPU(), upIn.Round(10*time.Millisecond))
	fmt.Printf("`halite -c DIR '*' test.ping`, wall time from start to exit, %d runs after %d warm-up:\n\n", o.runs, o.warmup)
	fmt.Println("| agents | p50 | p90 | min | max | goal p50 | status |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---|")
	p50 := medianDur(times)
	fmt.Printf("| %d | %s | %s | %s | %s | ≤ %s | %s |\n\n", o.n, ms(p50), ms(nearestRank(times, 90)), ms(times[0]), ms(times[len(times)-1]),
		ms(goalPingP50), status(p50 <= goalPingP50))
	fmt.Printf("Resident memory after %s idle (VmRSS; VmHWM is the peak since start), MiB:\n\n", o.idle)
	fmt.Println("| process | count | median VmRSS | max VmRSS | median VmHWM | max VmHWM | goal | status |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---|")
	medRSS := median(rss)
	fmt.Printf("| halite-agent | %d | %s | %s | %s | %s | ≤ %s median | %s |\n", len(rss), mib(medRSS), mib(maxOf(rss)),
		mib(median(hwm)), mib(maxOf(hwm)), mib(goalAgentRSS), status(medRSS <= goalAgentRSS))
	fmt.Printf("| halite-master | 1 | %s | %s | %s | %s | — | — |\n", mib(mst.rss), mib(mst.rss), mib(mst.hwm), mib(mst.hwm))
	return nil
}

func writeConfig(dir, name, conf string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make config dir %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write config %s: %w", name, err)
	}
	return nil
}

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free udp port: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// runCLI runs a short-lived command with a deadline and returns its
// stdout; a non-zero exit is an error carrying its stderr.
func runCLI(ctx context.Context, timeout time.Duration, path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := command(ctx, path, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", filepath.Base(path), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

// missingIDs returns the ids that have no "id:" line in the CLI's output.
func missingIDs(out string, ids []string) []string {
	var missing []string
	for _, id := range ids {
		if !strings.Contains(out, id+":") {
			missing = append(missing, id)
		}
	}
	return missing
}

// waitFor polls cond every 100 ms until it holds, it fails, d passes or
// ctx ends.
func waitFor(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

type mem struct{ rss, hwm float64 } // bytes

// readMem reads VmRSS and VmHWM from /proc/<pid>/status.
func readMem(pid int) (mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return mem{}, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	var m mem
	for _, line := range strings.Split(string(b), "\n") {
		var kb float64
		switch {
		case strings.HasPrefix(line, "VmRSS:"):
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "VmRSS:"), "%f kB", &kb); err != nil {
				return mem{}, fmt.Errorf("parse VmRSS of pid %d: %w", pid, err)
			}
			m.rss = kb * 1024
		case strings.HasPrefix(line, "VmHWM:"):
			if _, err := fmt.Sscanf(strings.TrimPrefix(line, "VmHWM:"), "%f kB", &kb); err != nil {
				return mem{}, fmt.Errorf("parse VmHWM of pid %d: %w", pid, err)
			}
			m.hwm = kb * 1024
		}
	}
	if m.rss == 0 {
		return mem{}, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return m, nil
}

// median of a non-empty slice (sorts it).
func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// medianDur is the median of sorted durations.
func medianDur(s []time.Duration) time.Duration {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// nearestRank is the p-th percentile of sorted durations by nearest rank.
func nearestRank(s []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func status(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}
