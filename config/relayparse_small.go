//go:build !relay && (arm || mips || mipsle)

package config

// relay accepts any relay: section: this agent build has no relay and
// refuses to start with one (cmd/halite-agent/norelay.go).
func (v value) relay(dst **Relay) error {
	*dst = DefaultRelay()
	return nil
}
