package relay

import (
	"errors"
	"io"

	"github.com/halite-fleet/halite/protocol"
)

// tamperHook, set only in a binary built with -tags halite_tamper (the
// end-to-end tests' tampering relay), gives a new relay its tamper
// function. Production builds have none: the relay forwards bytes.
var tamperHook func() func(protocol.Type, []byte) []byte

// dumpHook, set only in a binary built with -tags halite_tamper, gives a
// new relay a function that is handed every byte it reads (tap): the
// end-to-end tests look in what a relay saw for secrets it must not see.
var dumpHook func() func([]byte)

// tap returns rw, whose reads go to r.dump too when it is set.
func (r *Relay) tap(rw io.ReadWriter) io.ReadWriter {
	if r.dump == nil {
		return rw
	}
	return &tapped{ReadWriter: rw, dump: r.dump}
}

type tapped struct {
	io.ReadWriter
	dump func([]byte)
}

func (t *tapped) Read(p []byte) (int, error) {
	n, err := t.ReadWriter.Read(p)
	if n > 0 {
		t.dump(p[:n])
	}
	return n, err
}

// flipSigned returns wire (a whole frame of a job, a return or a
// FileAnswer) with the last byte of its signed body flipped, or (a chunk's
// BlobData) a byte of
// the chunk flipped: what a relay that tampers would do, which the ends
// must refuse.
func flipSigned(wire []byte) ([]byte, error) {
	if len(wire) < 5 {
		return nil, errors.New("tamper: short frame")
	}
	msg, err := protocol.Decode(wire[4:])
	if err != nil {
		return nil, err
	}
	var s *protocol.Signed
	switch m := msg.(type) {
	case *protocol.Job:
		s = &m.Signed
	case *protocol.Return:
		s = &m.Signed
	case *protocol.FileAnswer:
		if m.Err != "" {
			return wire, nil
		}
		s = &m.Signed
	case *protocol.BlobData:
		// A chunk the relay serves: one byte of it altered.
		if len(m.Data) == 0 {
			return wire, nil
		}
		m.Data = append([]byte(nil), m.Data...)
		m.Data[len(m.Data)/2] ^= 1
		b, err := protocol.Encode(m)
		if err != nil {
			return nil, err
		}
		return protocol.AppendFrame(nil, b), nil
	default:
		return wire, nil
	}
	if len(s.Body) == 0 {
		return nil, errors.New("tamper: empty body")
	}
	s.Body = append([]byte(nil), s.Body...)
	s.Body[len(s.Body)-1] ^= 1
	b, err := protocol.Encode(msg)
	if err != nil {
		return nil, err
	}
	return protocol.AppendFrame(nil, b), nil
}
