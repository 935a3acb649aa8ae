package relay

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/protocol"
)

// maxItemFrame is the largest return or event frame a device may send
// through the relay: one that, alone in a protocol.Batch, still fits the
// master's frame limit. The agent keeps its own under
// protocol.DefaultMaxFrame - 4096.
const maxItemFrame = protocol.DefaultMaxFrame - protocol.BatchItemOverhead

// batchItemCost is what an item adds to a batch besides its frame and id,
// for the size bound: at most, with the id's and the frame's heads.
const batchItemCost = 20

// batchWriteTimeout bounds one batch's write on the control stream: a
// master that reads nothing for that long has lost the link.
const batchWriteTimeout = 30 * time.Second

// batcher sends the returns and events of a link's devices to the master
// in protocol.Batch frames on the link's control stream, when the master
// takes them (capability 6): a batch goes when it holds max bytes, or
// delay after its first item, whichever comes first. The master then reads
// and commits a batch at once, where a frame on each device's stream cost
// it a read and a job cache wait each.
//
// Device readers only append (add): one goroutine (run) writes, so a slow
// master never blocks a device's reader. The queue is bounded by limit
// bytes; past it, or when a write fails, the batcher gives the link up
// (its connection is closed: runLink reconnects, and every device's
// unacknowledged items, which the store still holds, are sent again).
// One queue for every device keeps each device's items in the order it
// sent them.
type batcher struct {
	conn   *quic.Conn
	ctrl   *protocol.Framer
	stream *quic.Stream // ctrl's stream, for the write deadline
	max    int
	delay  time.Duration
	limit  int
	sent   *atomic.Uint64 // batches written, for Stats

	wake chan struct{} // 1 buffered: items wait that may be due
	done chan struct{} // closed by stop

	mu     sync.Mutex
	q      []protocol.BatchItem
	bytes  int       // of q, as itemSize counts them
	since  time.Time // when q's first item was added
	closed bool
	err    error // why the batcher gave the link up
}

func newBatcher(conn *quic.Conn, ctrl *protocol.Framer, stream *quic.Stream, maxBytes int, delay time.Duration, limit int, sent *atomic.Uint64) *batcher {
	return &batcher{conn: conn, ctrl: ctrl, stream: stream, max: maxBytes, delay: delay, limit: max(limit, 2*maxBytes), sent: sent,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func itemSize(id string, frame []byte) int { return len(id) + len(frame) + batchItemCost }

// add queues a device's frame body (a Return or Event as the device sent
// it) for the device's session on the link's stream sid. An item added
// after the batcher stopped is dropped: the store holds it for the next
// link.
func (b *batcher) add(id string, sid quic.StreamID, frame []byte) {
	n := itemSize(id, frame)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	if b.bytes+n > b.limit {
		waiting := b.bytes
		b.mu.Unlock()
		b.fail(fmt.Errorf("the master does not keep up: %d bytes of batches wait (limit %d)", waiting, b.limit))
		return
	}
	if len(b.q) == 0 {
		b.since = time.Now()
	}
	b.q = append(b.q, protocol.BatchItem{ID: id, Stream: uint64(sid), Frame: frame})
	b.bytes += n
	// The writer needs waking for a first item (to start the delay) and
	// for a full batch; otherwise its timer or its write is under way.
	due := len(b.q) == 1 || (b.bytes >= b.max && b.bytes-n < b.max)
	b.mu.Unlock()
	if due {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
}

// fail gives the link up: nothing more is queued, and the connection is
// closed, which ends runLink.
func (b *batcher) fail(err error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed, b.err, b.q = true, err, nil
	b.mu.Unlock()
	b.conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindRateLimited), "relay batches: "+err.Error())
}

// stop ends run; what waits is dropped (the store holds it).
func (b *batcher) stop() {
	b.mu.Lock()
	if !b.closed {
		b.closed, b.q = true, nil
	}
	b.mu.Unlock()
	select {
	case <-b.done:
	default:
		close(b.done)
	}
}

// failed returns why the batcher gave the link up, if it did.
func (b *batcher) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// run writes batches until stop or a failure.
func (b *batcher) run() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		b.mu.Lock()
		n, bytes, since, closed := len(b.q), b.bytes, b.since, b.closed
		b.mu.Unlock()
		if closed {
			return
		}
		if n == 0 {
			select {
			case <-b.wake:
			case <-b.done:
				return
			}
			continue
		}
		if wait := b.delay - time.Since(since); bytes < b.max && wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-b.wake: // a full batch, perhaps: look again
				timer.Stop()
				continue
			case <-b.done:
				return
			}
		}
		items := b.take()
		if len(items) == 0 {
			continue
		}
		b.stream.SetWriteDeadline(time.Now().Add(batchWriteTimeout))
		err := b.ctrl.Write(&protocol.Batch{Items: items})
		b.stream.SetWriteDeadline(time.Time{})
		if err != nil {
			b.fail(fmt.Errorf("write batch: %w", err)) // nothing to do if stopped
			return
		}
		b.sent.Add(1)
	}
}

// take removes from the queue the items of one batch: those that fit in
// max bytes, and at least one. What stays is at least as old as what was
// taken, so its delay runs from the same start.
func (b *batcher) take() []protocol.BatchItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	size, i := 0, 0
	for ; i < len(b.q); i++ {
		n := itemSize(b.q[i].ID, b.q[i].Frame)
		if i > 0 && size+n > b.max {
			break
		}
		size += n
	}
	items := b.q[:i:i]
	b.q = b.q[i:]
	b.bytes -= size
	if len(b.q) == 0 {
		b.q = nil
	}
	return items
}
