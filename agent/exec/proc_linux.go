package exec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strconv"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process (SIGKILL) when the
// agent dies, even by kill -9, so that no command outlives it unwatched.
// Linux sends it when the thread that started the process exits, not the
// process: the Go runtime ends a thread only when a goroutine locked to
// it (runtime.LockOSThread) returns without unlocking, which the agent
// never does. The signal reaches the shell, not what it started in the
// background; the agent's next start kills those (KillJobProcesses).
func dieWithParent(cmd *osexec.Cmd) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// KillJobProcesses kills (SIGKILL) every process that carries the
// environment mark of job jid of agent id (what cmd.run started for it
// and did not end: the job ran when the agent died), and returns how many
// it killed. A process that cleared its environment, or runs as another
// user, escapes it.
func KillJobProcesses(id, jid string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("kill job processes: %w", err)
	}
	want := []byte("\x00" + jobMark(id, jid) + "\x00")
	self := os.Getpid()
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			n++
		} else if !errors.Is(err, syscall.ESRCH) {
			return n, fmt.Errorf("kill job process %d: %w", pid, err)
		}
	}
	return n, nil
}
