package agent

import "github.com/halite-fleet/halite/protocol"

// Identity is the agent's key, which a relay running in the same process
// (package relay) uses for its listener and its upstream link.
func (a *Agent) Identity() *protocol.Identity { return a.id }
