//go:build !linux

package version

func uname() utsname { return utsname{machine: goarch()} }

func osRelease() (dist, version string) { return "", "" }
