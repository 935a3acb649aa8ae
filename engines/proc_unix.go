//go:build unix

package engines

import (
	"errors"
	"os"
	osexec "os/exec"
	"syscall"
	"time"
)

// ownGroup starts cmd in a process group of its own; cancelling sends
// SIGTERM to the whole group, and Go kills the leader 5 s later if it is
// still there. killGroup then ends whatever is left of the group, so an
// engine's children never outlive it.
func ownGroup(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = 5 * time.Second
}

// killGroup kills what is left of cmd's process group after it exited.
func killGroup(cmd *osexec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
