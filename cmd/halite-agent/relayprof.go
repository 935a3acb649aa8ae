//go:build !(arm || mips || mipsle)

package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"go.uber.org/zap"
)

// Profiles of a relay, for measuring (what a relay costs per device), not
// for running a site; environment variables, like the master's
// HALITE_CPUPROFILE, so that no option is added for them. Built where the
// relay is by default (relay.go), not into a 32-bit ARM or MIPS agent
// built -tags relay: runtime/pprof is 0.2 MiB there (relayprof_small.go).
//
//	HALITE_CPUPROFILE=FILE   a CPU profile of the whole run, written when the agent stops
//	HALITE_HEAPPROFILE=FILE  a heap profile after a collection, written each time the
//	                         agent gets SIGUSR1 (the devices are still connected then;
//	                         when the relay stops they have gone)
//
// `go tool pprof halite-agent FILE` reads either.
const (
	cpuProfileEnv  = "HALITE_CPUPROFILE"
	heapProfileEnv = "HALITE_HEAPPROFILE"
)

// startRelayProfiles starts what HALITE_CPUPROFILE and HALITE_HEAPPROFILE
// ask for and returns the function that ends it; with neither set it
// does nothing.
func startRelayProfiles(ctx context.Context, log *zap.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	if path := os.Getenv(cpuProfileEnv); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: start the CPU profile: %w", cpuProfileEnv, err)
		}
		stops = append(stops, func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Warn("CPU profile", zap.String("file", path), zap.Error(err))
			}
		})
	}
	if path := os.Getenv(heapProfileEnv); path != "" {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		done := make(chan struct{})
		hctx, cancel := context.WithCancel(ctx)
		go func() {
			defer close(done)
			for {
				select {
				case <-hctx.Done():
					return
				case <-usr1:
					if err := writeHeapProfile(path); err != nil {
						log.Warn("heap profile", zap.Error(err))
					} else {
						log.Info("heap profile written", zap.String("file", path))
					}
				}
			}
		}()
		stops = append(stops, func() {
			signal.Stop(usr1)
			cancel()
			<-done
		})
	}
	return stop, nil
}

// writeHeapProfile writes the heap's live objects, after a collection, to
// path (through a file beside it, renamed, so a reader never sees half).
func writeHeapProfile(path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", heapProfileEnv, err)
	}
	return nil
}
