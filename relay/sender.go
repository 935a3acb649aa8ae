package relay

import (
	"errors"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// sendQueue is how many frames may wait for one stream (a device's, or a
// device's upstream stream) before its session is dropped.
const sendQueue = 256

// sender writes whole frames to one stream without blocking its callers:
// a frame goes to QUIC at once when nothing waits (TryWriteAll copies it),
// else into a queue that a goroutine, started only while something waits,
// drains in order. A relay serves thousands of streams; most of the time
// nothing waits, so most have no writer goroutine.
type sender struct {
	s      *quic.Stream
	wg     *sync.WaitGroup // counts the drain goroutines
	onFail func()          // called once when a write fails or the queue is full

	mu      sync.Mutex
	q       [][]byte
	done    map[*byte]func() // called when the frame is written or dropped (sendDone)
	running bool
	closed  bool
	failed  bool
}

func newSender(s *quic.Stream, wg *sync.WaitGroup, onFail func()) *sender {
	return &sender{s: s, wg: wg, onFail: onFail}
}

// send queues wire (a whole frame) and reports whether it was taken.
func (w *sender) send(wire []byte) bool { return w.sendDone(wire, nil) }

// sendDone is send, with done (if not nil) called once wire is handed to
// QUIC or dropped, whether it was taken or not: a caller that bounds the
// frames it has in flight (chunks) learns when one is out of its hands.
func (w *sender) sendDone(wire []byte, done func()) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		if done != nil {
			done()
		}
		return false
	}
	if len(w.q) == 0 && !w.running {
		err := w.s.TryWriteAll(wire)
		if err == nil {
			w.mu.Unlock()
			if done != nil {
				done()
			}
			return true
		}
		if !errors.Is(err, quic.ErrWouldBlock) {
			w.failLocked()
			if done != nil {
				done()
			}
			return false
		}
	}
	if len(w.q) >= sendQueue {
		w.failLocked()
		if done != nil {
			done()
		}
		return false
	}
	w.q = append(w.q, wire)
	if done != nil {
		if w.done == nil {
			w.done = make(map[*byte]func())
		}
		w.done[&wire[0]] = done
	}
	if !w.running {
		w.running = true
		w.wg.Add(1)
		go w.drain()
	}
	w.mu.Unlock()
	return true
}

// failLocked closes the sender and calls onFail; w.mu is held and released.
func (w *sender) failLocked() {
	first := !w.failed
	w.failed, w.closed = true, true
	w.q = nil
	dones := w.takeDoneLocked()
	w.mu.Unlock()
	for _, f := range dones {
		f()
	}
	if first && w.onFail != nil {
		w.onFail()
	}
}

// takeDoneLocked returns and forgets the done functions of the frames
// that wait; w.mu is held.
func (w *sender) takeDoneLocked() map[*byte]func() {
	d := w.done
	w.done = nil
	return d
}

func (w *sender) drain() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		if len(w.q) == 0 || w.closed {
			w.running = false
			w.mu.Unlock()
			return
		}
		b := w.q[0]
		w.q[0] = nil
		w.q = w.q[1:]
		done := w.done[&b[0]]
		delete(w.done, &b[0])
		w.mu.Unlock()
		w.s.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := w.s.Write(b)
		if done != nil {
			done()
		}
		if err != nil {
			w.mu.Lock()
			w.running = false
			w.failLocked()
			return
		}
	}
}

// close stops the sender: what waits is dropped.
func (w *sender) close() { w.closeWith(nil) }

// closeWith stops the sender after a last frame, written only if nothing
// is being written now (best effort: it says why the stream ends).
func (w *sender) closeWith(last []byte) {
	w.mu.Lock()
	if last != nil && !w.closed && !w.running {
		w.s.TryWriteAll(last)
	}
	w.closed = true
	w.q = nil
	dones := w.takeDoneLocked()
	w.mu.Unlock()
	for _, f := range dones {
		f()
	}
}
