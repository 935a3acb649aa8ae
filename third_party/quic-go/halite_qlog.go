package quic

import (
	"errors"

	"github.com/quic-go/quic-go/internal/protocol"
)

// errNoQlog refuses a Tracer in a build without qlog
// (internal/protocol/halite_nodebug.go). This file is Halite's
// (tools/quicfork); tools/quicfork/nolog leaves it as it is.
var errNoQlog = errors.New("quic: a Tracer is set, but this build has no qlog (32-bit ARM and MIPS builds leave it out; build with -tags quicdebug)")

func (c *Config) checkQlog() error {
	if !protocol.QlogEnabled && c.Tracer != nil {
		return errNoQlog
	}
	return nil
}

func (t *Transport) checkQlog() error {
	if !protocol.QlogEnabled && t.Tracer != nil {
		return errNoQlog
	}
	return nil
}
