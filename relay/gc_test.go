package relay

import (
	"runtime/debug"
	"testing"

	"github.com/halite-fleet/halite/config"
)

// TestSetGCPercent: the relay's gc_percent is the process's GOGC, unless
// GOGC is in the environment or a lower percent is in force (an agent's
// beacons set 25).
func TestSetGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	conf := config.DefaultRelay()
	t.Setenv("GOGC", "")

	debug.SetGCPercent(100)
	if p, set := SetGCPercent(conf); p != 50 || !set {
		t.Errorf("default: %d, %v; want 50, set", p, set)
	}
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GOGC in force %d, want the relay's 50", got)
	}

	debug.SetGCPercent(25) // beacons
	if p, set := SetGCPercent(conf); p != 25 || set {
		t.Errorf("under beacons' 25: %d, %v; want 25, not set", p, set)
	}
	if got := debug.SetGCPercent(100); got != 25 {
		t.Errorf("GOGC in force %d, want 25 kept", got)
	}

	t.Setenv("GOGC", "200")
	debug.SetGCPercent(200)
	if p, set := SetGCPercent(conf); p != 200 || set {
		t.Errorf("GOGC=200 in the environment: %d, %v; want 200, not set", p, set)
	}
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("GOGC in force %d, want the environment's 200", got)
	}
}
