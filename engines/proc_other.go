//go:build !unix

package engines

import osexec "os/exec"

func ownGroup(*osexec.Cmd)  {}
func killGroup(*osexec.Cmd) {}
