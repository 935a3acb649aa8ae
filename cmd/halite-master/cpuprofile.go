package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names the file the master writes a CPU profile to while it
// runs (off when unset): the profile is written when the master stops,
// and `go tool pprof halite-master FILE` reads it. It is an environment
// variable rather than an option because it is for measuring (procbench,
// an operator chasing a slow master), not for running a fleet; the
// profiler's cost is about 1 % of the CPU the master uses meanwhile.
const cpuProfileEnv = "HALITE_CPUPROFILE"

// startCPUProfile starts the CPU profile HALITE_CPUPROFILE asks for and
// returns the function that ends it and closes the file; with no such
// variable it returns a function that does nothing.
func startCPUProfile() (stop func() error, err error) {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start the CPU profile: %w", cpuProfileEnv, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		return nil
	}, nil
}
