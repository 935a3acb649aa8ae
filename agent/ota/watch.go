package ota

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a child is given to stop after SIGTERM, or to
// exit after it committed, before it is killed.
const stopGrace = 10 * time.Second

// Outcome is how a trial ended, as the watchdog saw it.
type Outcome struct {
	Committed bool
	Reason    string // why it did not commit
}

// Watch is the old process's watchdog. Its agent has stopped; Watch runs
// B.new as a child on trial (args are the program's arguments without
// argv[0], env its environment), and waits for the child to exit, for
// timeout, or for ctx. A child that exits without committing, or is
// still on trial at the timeout (then killed), failed: the reason goes
// into the marker. The caller then restarts B (Restart), unless ctx
// ended: then the next start settles the trial.
func Watch(ctx context.Context, p Paths, argv0 string, args, env []string, timeout time.Duration, logf func(string, ...any)) (Outcome, error) {
	// The parent-death signal fires when the thread that started the
	// child exits: keep this goroutine on its thread until the child is
	// gone (golang/go#27505).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(p.New, args...)
	cmd.Args[0] = argv0
	cmd.Env = append(withoutMode(env), EnvMode+"="+ModeTrial)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		reason := fmt.Sprintf("the new build did not start: %v", err)
		if ferr := fail(p, reason); ferr != nil {
			return Outcome{Reason: reason}, ferr
		}
		return Outcome{Reason: reason}, nil
	}
	logf("update on trial: started %s as process %d for at most %s", p.New, cmd.Process.Pid, timeout)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var reason string
	select {
	case err := <-done:
		if exists(p.New) {
			reason = fmt.Sprintf("the new build exited before a master accepted it (%v)", exitText(err))
		}
	case <-timer.C:
		if exists(p.New) {
			reason = fmt.Sprintf("no master accepted the new build within update_trial_timeout (%s)", timeout)
			cmd.Process.Kill()
			<-done
		} else {
			stopChild(cmd, done)
		}
	case <-ctx.Done():
		stopChild(cmd, done)
		if exists(p.New) {
			reason = "the agent was stopped during the trial"
		}
	}
	out := Outcome{Committed: !exists(p.New), Reason: reason}
	if !out.Committed {
		if out.Reason == "" {
			out.Reason = "the trial did not commit"
		}
		if err := fail(p, out.Reason); err != nil {
			return out, fmt.Errorf("record trial failure: %w", err)
		}
	}
	return out, nil
}

// stopChild asks the child to stop, and kills it if it does not in time.
func stopChild(cmd *exec.Cmd, done chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		cmd.Process.Kill()
		<-done
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState.String()
	}
	return err.Error()
}

func withoutMode(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvMode+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Restart replaces this process with B (the build that boots now, old or
// new), with argv and env, marked ModeRestart; the process id stays.
// It returns only on failure.
func Restart(p Paths, argv, env []string) error {
	env = append(withoutMode(env), EnvMode+"="+ModeRestart)
	err := syscall.Exec(p.Bin, argv, env)
	return fmt.Errorf("restart %s: %w", p.Bin, err)
}
