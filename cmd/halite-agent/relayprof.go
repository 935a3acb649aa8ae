//go:build !(arm || mips || mipsle)

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/profile"
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
// startRelayProfiles starts what HALITE_CPUPROFILE and HALITE_HEAPPROFILE
// ask for and returns the function that ends it; with neither set it
// does nothing.
func startRelayProfiles(ctx context.Context, log *zap.Logger) (stop func(), err error) {
	stopCPU, err := profile.StartCPU()
	if err != nil {
		return nil, err
	}
	stops := []func(){func() {
		if err := stopCPU(); err != nil {
			log.Warn("CPU profile", zap.Error(err))
		}
	}}
	stop = func() {
		for _, f := range stops {
			f()
		}
	}
	if path := os.Getenv(profile.HeapEnv); path != "" {
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
					if err := profile.WriteHeap(path); err != nil {
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
