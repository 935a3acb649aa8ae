package relay

import (
	"os"
	"runtime/debug"

	"github.com/halite-fleet/halite/config"
)

// SetGCPercent sets the process's GOGC to the relay's gc_percent, unless
// GOGC is in the environment (the user's choice wins) or a lower percent
// is in force already (an agent with beacons runs at 25). It returns the
// percent in force and whether the relay's option set it.
//
// A relay's heap is mostly its devices' connections, alive for hours; at
// Go's 100 the collector lets the heap grow to twice that before it
// collects, and the process keeps what it grew to. That headroom was
// about 40 % of a relay's memory per device (docs/BENCHMARKS.md).
func SetGCPercent(conf *config.Relay) (percent int, set bool) {
	if os.Getenv("GOGC") != "" || conf == nil || conf.GCPercent <= 0 {
		prev := debug.SetGCPercent(100)
		debug.SetGCPercent(prev)
		return prev, false
	}
	prev := debug.SetGCPercent(conf.GCPercent)
	if prev >= 0 && prev < conf.GCPercent {
		debug.SetGCPercent(prev)
		return prev, false
	}
	return conf.GCPercent, true
}
