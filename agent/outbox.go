package agent

import (
	"sync"

	"github.com/halite-fleet/halite/protocol"
)

// outbox holds messages for the master. Returns and events go to its
// spool, on disk, and stay there until the master acknowledges them (or,
// past the spool's bound, newer ones push them out); every session sends
// again what is not acknowledged. Other messages (pongs, grains) matter
// only to the connection at hand: they wait in memory until written,
// bounded by max (past it, the oldest is dropped and counted).
type outbox struct {
	spool *spool

	mu      sync.Mutex
	q       []protocol.Message
	max     int
	dropped uint64
	notify  chan struct{}
}

func newOutbox(max int, sp *spool) *outbox {
	return &outbox{spool: sp, max: max, notify: make(chan struct{}, 1)}
}

func (o *outbox) wake() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// push queues a message that is not kept across connections.
func (o *outbox) push(m protocol.Message) (dropped bool) {
	o.mu.Lock()
	if len(o.q) >= o.max {
		o.q[0] = nil
		o.q = o.q[1:]
		o.dropped++
		dropped = true
	}
	o.q = append(o.q, m)
	o.mu.Unlock()
	o.wake()
	return dropped
}

// pushDurable spools a return or an event (its unsigned CBOR body) and
// returns once it is on disk, with how many older items were dropped for
// room.
func (o *outbox) pushDurable(kind protocol.Type, body []byte) (dropped int, err error) {
	_, dropped, err = o.spool.push(kind, body)
	if err != nil {
		return 0, err
	}
	o.wake()
	return dropped, nil
}

// peek returns the oldest in-memory message without removing it.
func (o *outbox) peek() (protocol.Message, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.q) == 0 {
		return nil, false
	}
	return o.q[0], true
}

// pop removes m if it is still the oldest in-memory message.
func (o *outbox) pop(m protocol.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.q) > 0 && o.q[0] == m {
		o.q[0] = nil
		o.q = o.q[1:]
	}
}

// len is how many messages wait, in memory and spooled.
func (o *outbox) len() int {
	o.mu.Lock()
	n := len(o.q)
	o.mu.Unlock()
	return n + o.spool.len()
}
