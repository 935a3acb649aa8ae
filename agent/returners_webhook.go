//go:build webhook

package agent

// The webhook returner, in an agent built with -tags webhook: Go's HTTP
// client costs the armv7 agent about 0.7 MiB, over its 8 MiB budget.
import _ "github.com/halite-fleet/halite/returners/webhook"
