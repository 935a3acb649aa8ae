package ota

import "syscall"

// childAttr makes the child on trial die with its watchdog.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
