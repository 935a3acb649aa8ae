//go:build halite_tamper

package relay

import (
	"bytes"
	"os"
	"sync"

	"github.com/halite-fleet/halite/protocol"
)

// A relay built with -tags halite_tamper alters what it forwards, as
// HALITE_TEST_TAMPER says: "job", "return" or "file_answer" flips a byte
// of the signed body of every frame of that type, "blob_data" a byte of every chunk it
// serves to a device; "replay" records the first job it
// forwards and sends it again in front of every later job (the same
// signed bytes: what a relay that recorded a job would replay, to a device
// that restarted meanwhile too). The end-to-end tests run it as a real
// process to show that devices and master refuse what it does. Never ship
// such a build.
//
// HALITE_TEST_DUMP names a file to which the relay appends every byte it
// reads from devices and from the master.
func init() {
	dumpHook = func() func([]byte) {
		name := os.Getenv("HALITE_TEST_DUMP")
		if name == "" {
			return nil
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			panic("HALITE_TEST_DUMP: " + err.Error())
		}
		var mu sync.Mutex
		return func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			f.Write(b)
		}
	}
	tamperHook = func() func(protocol.Type, []byte) []byte {
		want := os.Getenv("HALITE_TEST_TAMPER")
		switch want {
		case "":
			return nil
		case "replay":
			var mu sync.Mutex
			var first []byte
			return func(t protocol.Type, wire []byte) []byte {
				if t != protocol.TypeJob {
					return wire
				}
				mu.Lock()
				defer mu.Unlock()
				if first == nil {
					first = bytes.Clone(wire)
					return wire
				}
				return append(bytes.Clone(first), wire...)
			}
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
