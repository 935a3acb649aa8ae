package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// group is the set of daemons procbench started; stopAll ends them all.
type group struct {
	logDir string
	mu     sync.Mutex
	procs  []*proc
	wg     sync.WaitGroup // one per process, until its Wait returns
}

// proc is one daemon; done is closed when it has exited.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs a daemon with its output in logDir/name.log. If procbench
// itself is killed, the kernel kills the daemon too (Pdeathsig).
func (g *group) start(name, path string, args ...string) (*proc, error) {
	f, err := os.Create(filepath.Join(g.logDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stopAll sends SIGTERM to every running daemon, waits up to grace for
// them to exit, then kills the rest and waits (at most 5 s more).
func (g *group) stopAll(grace time.Duration) {
	g.mu.Lock()
	procs := g.procs
	g.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	var stubborn []string
	for _, p := range procs {
		select {
		case <-p.done:
			continue
		case <-deadline.C:
			deadline.Reset(0) // the grace is spent for everyone
		}
		if !p.exited() {
			stubborn = append(stubborn, p.name)
			p.cmd.Process.Kill()
		}
	}
	if len(stubborn) > 0 {
		fmt.Fprintf(os.Stderr, "procbench: killed %d processes that did not stop within %s of SIGTERM (first %s)\n", len(stubborn), grace, stubborn[0])
	}
	all := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(all)
	}()
	select {
	case <-all:
	case <-time.After(5 * time.Second):
		fmt.Fprintln(os.Stderr, "procbench: some processes did not exit after SIGKILL")
	}
}

// logTail returns the last n bytes of a daemon's log.
func (g *group) logTail(name string, n int64) string {
	f, err := os.Open(filepath.Join(g.logDir, name+".log"))
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, 0)
	}
	b := make([]byte, n)
	k, _ := f.Read(b)
	return string(b[:k])
}

// command is exec.CommandContext for a short-lived CLI run: killed when
// ctx ends, and with procbench.
func command(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}
