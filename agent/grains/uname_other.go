//go:build !linux

package grains

import "errors"

type utsname struct {
	release, version, machine, nodename string
}

// uname is only implemented on Linux; elsewhere the kernel grains are left
// out and cpuarch falls back to GOARCH.
func uname() (utsname, error) {
	return utsname{}, errors.New("uname: not implemented on this system")
}
