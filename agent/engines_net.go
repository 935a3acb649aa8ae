//go:build engines

package agent

// A build with -tags engines has the built-in engines that use net/http:
// webhook, http_forward and metrics.
import _ "github.com/halite-fleet/halite/engines/httpengine"
