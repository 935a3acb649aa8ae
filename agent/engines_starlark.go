//go:build starlark

package agent

import "github.com/halite-fleet/halite/engines/starlark"

// A build with -tags starlark runs Starlark user engines (about 1 MiB more
// on armv7, net/http included for their http API).
func init() { agentScript = starlark.Compile }
