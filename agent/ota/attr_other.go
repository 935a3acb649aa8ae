//go:build !linux

package ota

import "syscall"

// childAttr: outside Linux there is no parent-death signal; a child
// orphaned by a killed watchdog runs on until it stops, and the next
// start settles the trial.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
