//go:build !unix

package exec

import (
	"os"
	osexec "os/exec"
)

// ownProcessGroup leaves cmd as is: without Unix process groups only the
// shell itself is killed on cancel.
func ownProcessGroup(*osexec.Cmd) {}

// exitCode returns the process's exit code.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	return ps.ExitCode()
}
