package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding halite-agent")
	jobs := flag.Int("jobs", 100, "scheduled jobs (test.ping every second)")
	warmup := flag.Duration("warmup", 10*time.Second, "time before measuring")
	window := flag.Duration("window", 60*time.Second, "measured window")
	runs := flag.Int("runs", 1, "measured windows")
	masterless := flag.Bool("masterless", false, "run the agents masterless (returns go nowhere) instead of with a master away")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *jobs, *warmup, *window, *runs, *masterless); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench:", err)
		os.Exit(1)
	}
}

type agentProc struct {
	name string
	cmd  *exec.Cmd
	log  bytes.Buffer
}

// closedPort returns a UDP port nothing listens on (the master away).
func closedPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

func startAgent(ctx context.Context, bin, root, name, master, extra string) (*agentProc, error) {
	dir := filepath.Join(root, "etc", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("id: %s\nroot_dir: %s\nlog_file: ''\n%s%s", name, filepath.Join(root, name), master, extra)
	if err := os.WriteFile(filepath.Join(dir, "agent"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	a := &agentProc{name: name}
	a.cmd = exec.CommandContext(ctx, filepath.Join(bin, "halite-agent"), "-c", dir, "-l", "warning")
	a.cmd.Stdout, a.cmd.Stderr = &a.log, &a.log
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

func run(ctx context.Context, bin string, jobs int, warmup, window time.Duration, runs int, masterless bool) error {
	root, err := os.MkdirTemp("", "schedbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	master := "master_type: disable\n"
	if !masterless {
		port, err := closedPort()
		if err != nil {
			return err
		}
		master = fmt.Sprintf("master: 127.0.0.1\nmaster_port: %d\n", port)
	}
	var sched strings.Builder
	sched.WriteString("schedule:\n")
	for i := 0; i < jobs; i++ {
		fmt.Fprintf(&sched, "  ping%03d:\n    function: test.ping\n    seconds: 1\n", i)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	base, err := startAgent(ctx, bin, root, "plain", master, "")
	if err != nil {
		return err
	}
	defer base.cmd.Wait()
	with, err := startAgent(ctx, bin, root, "schedule", master, sched.String())
	if err != nil {
		return err
	}
	defer with.cmd.Wait()
	defer cancel()
	fmt.Printf("agents started (pids %d, %d; %d jobs at 1 s; %s); warm-up %s, then %d windows of %s\n",
		base.cmd.Process.Pid, with.cmd.Process.Pid, jobs, strings.TrimSpace(strings.ReplaceAll(master, "\n", " ")), warmup, runs, window)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(warmup):
	}
	const hz = 100 // USER_HZ on Linux
	for r := 0; r < runs; r++ {
		pb, pw := base.cmd.Process.Pid, with.cmd.Process.Pid
		b0, err := cpuTicks(pb)
		if err != nil {
			return fmt.Errorf("plain: %w (log: %s)", err, base.log.String())
		}
		w0, err := cpuTicks(pw)
		if err != nil {
			return fmt.Errorf("schedule: %w (log: %s)", err, with.log.String())
		}
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(window):
		}
		el := time.Since(t0).Seconds()
		b1, _ := cpuTicks(pb)
		w1, _ := cpuTicks(pw)
		cb, cw := float64(b1-b0)/hz/el*100, float64(w1-w0)/hz/el*100
		verdict := "within"
		if cw-cb > 1 {
			verdict = "OVER"
		}
		fmt.Printf("window %d: cpu plain %.3f%%, schedule %.3f%%, difference %.3f%% of a core (%s the 1%% goal)\n", r+1, cb, cw, cw-cb, verdict)
	}
	return nil
}
