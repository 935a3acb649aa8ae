package main

import (
	"testing"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/master/statecomp"
)

// halite-call asks the master to compile exactly the state functions a
// publish compiles (the test may import the master; the binary does not).
func TestCompiledByMasterMatchesStatecomp(t *testing.T) {
	for _, fun := range []string{"state.apply", "state.test", "state.highstate", "state.sls", "state.show_top",
		"state.show_highstate", "state.show_sls", "state.show_lowstate", "state.show_low_sls", "state.single",
		"state.running", "state.show_state_usage", "state.template", "state.sls_id", "test.ping", "state.low"} {
		if got, want := agent.CompiledByMaster(fun), statecomp.Compiles(fun); got != want {
			t.Errorf("%s: agent.CompiledByMaster %v, statecomp.Compiles %v", fun, got, want)
		}
	}
}
