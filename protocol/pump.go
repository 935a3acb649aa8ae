package protocol

import (
	"bufio"
	"sync/atomic"
	"time"

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
//
// The goroutines are pump workers, shared by all pumps: one that has read
// all there was waits a while (pumpWorkerIdle) for the next pump to wake
// before it ends, at most maxIdlePumpWorkers of them at once, and a pump
// that wakes while none waits gets a new one, so a handle that blocks holds
// up no other pump. A fresh goroutine's stack is small, and decoding a
// frame (CBOR, recursive) grew it, a copy each time: 12 % of a relay's CPU
// in a round of 10,000 devices when each wake had a goroutine of its own.
type Pump struct {
	s      *quic.Stream
	f      *Framer
	handle func([]byte) bool
	end    func(error)
	wire   bool // StartWirePump: handle gets whole frames
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
	return startPump(&Pump{s: s, f: f, handle: handle, end: end})
}

// StartWirePump is StartPump whose handle gets each whole frame, its
// length then its body (Framer.ReadWire), instead of the body alone.
func StartWirePump(s *quic.Stream, f *Framer, handle func(wire []byte) bool, end func(error)) *Pump {
	return startPump(&Pump{s: s, f: f, handle: handle, end: end, wire: true})
}

func startPump(p *Pump) *Pump {
	if _, buffered := p.f.r.(*bufio.Reader); buffered {
		// Readable looks at the stream: a frame in f's buffer would
		// wait there for the next one.
		panic("protocol.StartPump: the Framer has a read buffer (use NewStreamFramer)")
	}
	s := p.s
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
				select {
				case pumpWork <- p: // an idle worker takes it
				default:
					pumpWorkersStarted.Add(1)
					go pumpWorker(p)
				}
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

var (
	pumpWork           = make(chan *Pump) // unbuffered: a send succeeds only to a waiting worker
	pumpIdleWorkers    atomic.Int32
	pumpWorkersStarted atomic.Int64 // for tests
)

// A pump worker waits pumpWorkerIdle for the next pump before it ends
// (tests shorten it with pumpWorkerIdleTest); no more than
// maxIdlePumpWorkers wait at once (a burst's extra workers end at once).
const (
	pumpWorkerIdle     = 5 * time.Second
	maxIdlePumpWorkers = 64
)

var pumpWorkerIdleTest atomic.Int64

func pumpIdleFor() time.Duration {
	if d := pumpWorkerIdleTest.Load(); d > 0 {
		return time.Duration(d)
	}
	return pumpWorkerIdle
}

func pumpWorker(p *Pump) {
	var idle *time.Timer
	for {
		p.run()
		if pumpIdleWorkers.Add(1) > maxIdlePumpWorkers {
			pumpIdleWorkers.Add(-1)
			return
		}
		p = nil // an idle worker holds nothing of the pump it ran
		if idle == nil {
			idle = time.NewTimer(pumpIdleFor())
		} else {
			idle.Reset(pumpIdleFor())
		}
		select {
		case p = <-pumpWork:
			pumpIdleWorkers.Add(-1)
		case <-idle.C:
			pumpIdleWorkers.Add(-1)
			return
		}
	}
}

func (p *Pump) run() {
	for {
		for p.s.Readable() {
			var b []byte
			var err error
			if p.wire {
				b, err = p.f.ReadWire()
			} else {
				b, err = p.f.ReadFrame()
			}
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
