package master

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
)

// A pending key is told at once when decided (capability 8,
// protocol.CapKeyNotify): after answering an agent's Hello with a pending
// KeyStatus, the master keeps the agent's stream open, holding no hello
// slot, until the key store accepts, rejects or deletes the key (an
// operator's halite-key, the wheel, the reactor), the agent goes away, or
// pendingHold passes. An accepted or rejected key is then admitted again
// on the same stream: the agent reads a second KeyStatus and, accepted,
// goes on into its session at once instead of at its next try,
// acceptance_wait_time later. A deleted key ends the hold (the agent
// tries again after its wait, as Salt's minion does).

const (
	// maxHeldPending bounds the pending agents held at once, direct and
	// relayed; beyond it a pending agent's stream is closed after its
	// status, as for an agent without the capability.
	maxHeldPending = 1024
	// pendingHold is the longest a pending agent is held. An agent whose
	// acceptance wait is shorter closes its connection first and tries
	// again; one whose wait is longer waits the rest of it.
	pendingHold = 60 * time.Second
)

// keyWaiters are the pending agents held, by id. Their methods are safe
// for concurrent use.
type keyWaiters struct {
	mu   sync.Mutex
	n    int
	max  int
	byID map[string]map[*keyWaiter]struct{}
}

// keyWaiter is one held agent: the key store's changes of its id arrive on
// ch (the latest wins).
type keyWaiter struct {
	id string
	ch chan keys.Change
}

func newKeyWaiters(max int) *keyWaiters {
	return &keyWaiters{max: max, byID: make(map[string]map[*keyWaiter]struct{})}
}

// add registers a waiter for id, or returns nil when max are held.
func (w *keyWaiters) add(id string) *keyWaiter {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n >= w.max {
		return nil
	}
	kw := &keyWaiter{id: id, ch: make(chan keys.Change, 1)}
	set := w.byID[id]
	if set == nil {
		set = make(map[*keyWaiter]struct{})
		w.byID[id] = set
	}
	set[kw] = struct{}{}
	w.n++
	return kw
}

// remove unregisters kw; a nil kw is ignored.
func (w *keyWaiters) remove(kw *keyWaiter) {
	if kw == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.byID[kw.id]
	if _, ok := set[kw]; !ok {
		return
	}
	delete(set, kw)
	if len(set) == 0 {
		delete(w.byID, kw.id)
	}
	w.n--
}

// held is how many agents are held now.
func (w *keyWaiters) held() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// changed tells the waiters of c.ID about c (keys.Options.OnChange).
func (w *keyWaiters) changed(c keys.Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for kw := range w.byID[c.ID] {
		select {
		case <-kw.ch: // an older change, replaced by this one
		default:
		}
		kw.ch <- c
	}
}

// admitHeld is admit, holding the stream of an agent whose key is pending
// and that can be told (see above) until its key is decided, then
// admitting it again. release gives back what the Hello held (its hello
// slot, a relay's admission slot) before the hold; it may be called more
// than once. canHold says whether the peer can be held: the agent's
// capability, and for a relayed device its relay's.
func (m *Master) admitHeld(ctx context.Context, s *session, hello *protocol.Hello, via string, accepted func(), release func(), canHold bool) bool {
	for {
		var kw *keyWaiter
		if canHold {
			// Registered before the key store is asked, so that a
			// decision between the answer and the wait is not missed.
			kw = m.keyWait.add(hello.ID)
		}
		ok, pending := m.admit(ctx, s, hello, via, accepted, kw != nil)
		if !pending {
			m.keyWait.remove(kw)
			return ok
		}
		release()
		c, decided := m.holdPending(ctx, s, kw)
		m.keyWait.remove(kw)
		if !decided {
			s.stream.Close()
			if via != "" {
				s.stream.CancelRead(quic.StreamErrorCode(protocol.KindNotAccepted))
			}
			return false
		}
		s.log.Info("pending key decided; telling the waiting agent", zap.String("act", c.Act), zap.String("to", c.To))
	}
}

// holdPending waits for the key store to accept or reject the key kw
// waits on. It reports false when the hold ends otherwise: the key
// deleted, the agent (or its relay link) gone, pendingHold passed, the
// master stopping.
func (m *Master) holdPending(ctx context.Context, s *session, kw *keyWaiter) (keys.Change, bool) {
	t := time.NewTimer(pendingHold)
	defer t.Stop()
	var linkDone <-chan struct{}
	if s.relay != nil {
		linkDone = s.relay.ctrl.done
	}
	select {
	case c := <-kw.ch:
		return c, c.To == protocol.KeyAccepted || c.To == protocol.KeyRejected
	case <-s.stream.Context().Done():
	case <-s.conn.Context().Done():
	case <-linkDone:
	case <-t.C:
	case <-ctx.Done():
	case <-m.closing:
	}
	return keys.Change{}, false
}
