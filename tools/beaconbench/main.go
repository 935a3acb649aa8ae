package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const beaconsConf = `beacons:
  memusage:
    - percent: 0%
    - interval: 1
  diskusage:
    - /: 0%
    - interval: 1
  load:
    - interval: 1
  service:
    - services:
        halite-agent: {}
    - interval: 1
  network_info:
    - interfaces:
        lo: {}
    - interval: 1
`

func main() {
	bin := flag.String("bin", "bin", "directory holding halite-agent")
	warmup := flag.Duration("warmup", 10*time.Second, "time before measuring")
	window := flag.Duration("window", 60*time.Second, "measured window")
	runs := flag.Int("runs", 3, "measured windows")
	env := flag.String("env", "", "extra environment for both agents, e.g. GODEBUG=gctrace=1 (comma-separated)")
	benv := flag.String("beacon-env", "", "extra environment for the agent with beacons only, e.g. GOGC=10")
	flag.Parse()
	if *env != "" {
		extraEnv = strings.Split(*env, ",")
	}
	if *benv != "" {
		beaconEnv = strings.Split(*benv, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *warmup, *window, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "beaconbench:", err)
		os.Exit(1)
	}
}

// extraEnv is added to the agents' environment (-env); beaconEnv to the
// beacon agent's only (-beacon-env).
var extraEnv, beaconEnv []string

type agentProc struct {
	name string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

func startAgent(ctx context.Context, bin, root, name, extra string) (*agentProc, error) {
	dir := filepath.Join(root, "etc", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("id: %s\nroot_dir: %s\nmaster_type: disable\nfile_client: local\nlog_file: ''\n%s", name, filepath.Join(root, name), extra)
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	a := &agentProc{name: name}
	a.cmd = exec.CommandContext(ctx, filepath.Join(bin, "halite-agent"), "-c", dir, "-l", "warning")
	a.cmd.Stdout, a.cmd.Stderr = &a.log, &a.log
	a.cmd.Env = append(os.Environ(), extraEnv...)
	if extra != "" {
		a.cmd.Env = append(a.cmd.Env, beaconEnv...)
	}
	a.cmd.Cancel = func() error { return a.cmd.Process.Signal(syscall.SIGTERM) }
	a.cmd.WaitDelay = 10 * time.Second
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return a, nil
}

// cpuTicks is utime+stime of pid, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ut + st, nil
}

// rssKiB reads a field of /proc/<pid>/status in KiB: VmRSS, RssAnon
// (heap, stacks: what the agent allocates) or RssFile (the binary's pages
// that were touched).
func rssKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			return strconv.ParseInt(strings.Fields(l)[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", field)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func run(ctx context.Context, bin string, warmup, window time.Duration, runs int) error {
	root, err := os.MkdirTemp("", "beaconbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, err := startAgent(ctx, bin, root, "plain", "")
	if err != nil {
		return err
	}
	defer base.cmd.Wait()
	with, err := startAgent(ctx, bin, root, "beacons", beaconsConf)
	if err != nil {
		return err
	}
	defer with.cmd.Wait()
	defer cancel()
	fmt.Printf("agents started (pids %d, %d); warm-up %s, then %d windows of %s\n", base.cmd.Process.Pid, with.cmd.Process.Pid, warmup, runs, window)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(warmup):
	}
	const hz = 100 // USER_HZ on Linux
	agents := []*agentProc{base, with}
	cpu := map[string][]float64{}
	rss := map[string][]float64{}
	anon := map[string][]float64{}
	file := map[string][]float64{}
	for r := 0; r < runs; r++ {
		start := map[string]int64{}
		for _, a := range agents {
			t, err := cpuTicks(a.cmd.Process.Pid)
			if err != nil {
				return fmt.Errorf("%s: %w (log: %s)", a.name, err, a.log.String())
			}
			start[a.name] = t
		}
		t0 := time.Now()
		tick := time.NewTicker(time.Second)
		for time.Since(t0) < window {
			select {
			case <-ctx.Done():
				tick.Stop()
				return ctx.Err()
			case <-tick.C:
			}
			for _, a := range agents {
				k, err := rssKiB(a.cmd.Process.Pid, "VmRSS")
				if err != nil {
					tick.Stop()
					return fmt.Errorf("%s: %w", a.name, err)
				}
				rss[a.name] = append(rss[a.name], float64(k)/1024)
				k, _ = rssKiB(a.cmd.Process.Pid, "RssAnon")
				anon[a.name] = append(anon[a.name], float64(k)/1024)
				k, _ = rssKiB(a.cmd.Process.Pid, "RssFile")
				file[a.name] = append(file[a.name], float64(k)/1024)
			}
		}
		tick.Stop()
		el := time.Since(t0).Seconds()
		for _, a := range agents {
			t, _ := cpuTicks(a.cmd.Process.Pid)
			cpu[a.name] = append(cpu[a.name], float64(t-start[a.name])/hz/el*100)
		}
		fmt.Printf("window %d: cpu plain %.3f%%, beacons %.3f%%\n", r+1, cpu["plain"][r], cpu["beacons"][r])
	}
	cb, cw := median(cpu["plain"]), median(cpu["beacons"])
	rb, rw := median(rss["plain"]), median(rss["beacons"])
	fmt.Println()
	ab, aw := median(anon["plain"]), median(anon["beacons"])
	fb, fw := median(file["plain"]), median(file["beacons"])
	fmt.Println("| agent | CPU, % of one core (median of windows) | VmRSS median | RssAnon | RssFile |")
	fmt.Println("| --- | --- | --- | --- | --- |")
	fmt.Printf("| no beacons | %.3f%% | %.2f MiB | %.2f MiB | %.2f MiB |\n", cb, rb, ab, fb)
	fmt.Printf("| five beacons at 1 s (memusage, diskusage, load, service, network_info), each firing every check | %.3f%% | %.2f MiB | %.2f MiB | %.2f MiB |\n", cw, rw, aw, fw)
	fmt.Printf("| difference | %.3f%% (goal ≤ 1%%) | %.2f MiB (goal ≤ 2 MiB) | %.2f MiB | %.2f MiB |\n", cw-cb, rw-rb, aw-ab, fw-fb)
	if len(extraEnv) > 0 {
		for _, a := range agents {
			lines := strings.Split(strings.TrimSpace(a.log.String()), "\n")
			fmt.Printf("\n%s agent, last lines of its output:\n%s\n", a.name, strings.Join(lines[max(0, len(lines)-6):], "\n"))
		}
	}
	return nil
}
