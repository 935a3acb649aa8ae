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
// SIGTERM to the whole group, and SIGKILL to it 5 s later if it is still
// there, so an engine's children never outlive it.
func ownGroup(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		pid := cmd.Process.Pid
		err := syscall.Kill(-pid, syscall.SIGTERM)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		go func() {
			time.Sleep(5 * time.Second) // a grace period, not a wait for a condition
			syscall.Kill(-pid, syscall.SIGKILL)
		}()
		return err
	}
	cmd.WaitDelay = 6 * time.Second
}
