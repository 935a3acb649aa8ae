package protocol

import (
	"bufio"
	"sync/atomic"

	"github.com/quic-go/quic-go"
)

// Pump reads the frames of a QUIC stream and hands them to a function, in
// order, like a goroutine looping on Framer.ReadFrame would, but with no
// goroutine while nothing arrives: one is started when the stream has
// something to read and ends once it has read all there was
// (quic.Stream.OnReadable, Readable). A goroutine parked in Read costs its
// stack, 4 KiB, for as long as the stream is open; a relay holds two such
// streams per device for hours, and the master one per device behind a
// relay.
//
// A frame that has begun to arrive is read to its end as ReadFrame reads
// it (the goroutine waits for the rest of it).
type Pump struct {
	s      *quic.Stream
	f      *Framer
	handle func([]byte) bool
	end    func(error)
	state  atomic.Uint32
}

const (
	pumpIdle    = iota // no goroutine: waiting for the stream
	pumpRunning        // a goroutine reads
	pumpAgain          // a goroutine reads, and the stream woke meanwhile
	pumpStopped        // handle said stop, or a read failed
)

// StartPump reads s's frames with f (a NewStreamFramer on s, or on a
// wrapper of s: a Framer with a read buffer panics) and calls handle with
// each frame's body, in order, one at a time, until handle returns false
// or a read fails. Then it calls end, once, with the
// read's error (nil when handle stopped). handle and end run on the
// pump's goroutine; handle may block (the stream is not read meanwhile,
// so that QUIC's flow control holds the peer back). To stop reading from
// outside, cancel the stream's reading (s.CancelRead) or close its
// connection: the pump wakes, the read fails, end is called.
func StartPump(s *quic.Stream, f *Framer, handle func([]byte) bool, end func(error)) *Pump {
	if _, buffered := f.r.(*bufio.Reader); buffered {
		// Readable looks at the stream: a frame in f's buffer would
		// wait there for the next one.
		panic("protocol.StartPump: the Framer has a read buffer (use NewStreamFramer)")
	}
	p := &Pump{s: s, f: f, handle: handle, end: end}
	s.OnReadable(p.wake)
	p.wake() // what arrived before
	return p
}

// wake starts the pump's goroutine, or tells the running one to look
// again before it ends. It is called with the stream's lock held: it only
// changes the state and starts a goroutine.
func (p *Pump) wake() {
	for {
		switch st := p.state.Load(); st {
		case pumpIdle:
			if p.state.CompareAndSwap(pumpIdle, pumpRunning) {
				go p.run()
				return
			}
		case pumpRunning:
			if p.state.CompareAndSwap(pumpRunning, pumpAgain) {
				return
			}
		default: // already told, or stopped
			return
		}
	}
}

func (p *Pump) run() {
	for {
		for p.s.Readable() {
			b, err := p.f.ReadFrame()
			if err != nil {
				p.stop(err)
				return
			}
			if !p.handle(b) {
				p.stop(nil)
				return
			}
		}
		// Nothing more to read now: end, unless the stream woke since
		// Readable said so (then look again).
		if p.state.CompareAndSwap(pumpRunning, pumpIdle) {
			return
		}
		p.state.Store(pumpRunning)
	}
}

func (p *Pump) stop(err error) {
	p.state.Store(pumpStopped)
	p.s.OnReadable(nil)
	p.end(err)
}
