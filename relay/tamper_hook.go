//go:build halite_tamper

package relay

import (
	"os"

	"github.com/halite-fleet/halite/protocol"
)

// A relay built with -tags halite_tamper alters the signed body of every
// frame of the type HALITE_TEST_TAMPER names ("job" or "return") that it
// forwards: the end-to-end tests run it as a real process to show that
// devices and master refuse what it alters. Never ship such a build.
func init() {
	tamperHook = func() func(protocol.Type, []byte) []byte {
		want := os.Getenv("HALITE_TEST_TAMPER")
		if want == "" {
			return nil
		}
		return func(t protocol.Type, wire []byte) []byte {
			if t.String() != want {
				return wire
			}
			if out, err := flipSigned(wire); err == nil {
				return out
			}
			return wire
		}
	}
}
