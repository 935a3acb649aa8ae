//go:build !linux

package exec

import osexec "os/exec"

// dieWithParent does nothing: only Linux kills a child with its parent.
func dieWithParent(*osexec.Cmd) {}

// KillJobProcesses kills nothing: only Linux lets the agent find what a
// job left running by its environment.
func KillJobProcesses(id, jid string) (int, error) { return 0, nil }
