package relay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// A device's BlobGet (a chunk of a file, by its SHA-256) is answered by
// the relay: from its chunk cache (chunkcache.go), or else fetched from
// the master on the asking device's session, once for all the devices
// that ask for the same chunk meanwhile, checked against its hash, cached
// and served to each. The master's BlobData never goes down as it came: a
// chunk is served only once checked, and the device checks it again
// against the manifest of its signed job.
//
// What chunks cost the relay is bounded: a device may have maxDeviceBlobs
// BlobGets unanswered (more are refused at once; the agent asks again),
// and blobSlots chunks relay-wide may be in hand, being fetched, read or
// waiting in a device's send queue (the rest wait for a slot).

const (
	maxDeviceBlobs = 8
	blobSlots      = 64 // × 256 KiB = 16 MiB
	// blobUpTimeout bounds one chunk's fetch from the master.
	blobUpTimeout = 30 * time.Second
)

var errNoUpstream = errors.New("the relay cannot reach the master now")

// chunks is the relay's chunk service.
type chunks struct {
	cache *chunkCache // nil: off
	slots chan struct{}

	mu      sync.Mutex
	calls   map[[32]byte]*chunkCall // fetches from the master under way
	waiting map[uint64]chan *protocol.BlobData
	next    uint64

	upBytes atomic.Uint64 // chunk bytes fetched from the master, ever
	hits    atomic.Uint64 // chunks served from the cache, ever
	misses  atomic.Uint64 // chunks fetched from the master, ever
	shared  atomic.Uint64 // chunks served from another device's fetch, ever
}

// chunkCall is one fetch from the master that several devices wait for.
type chunkCall struct {
	done chan struct{}
	data []byte
	err  error
}

func newChunks(cache *chunkCache) *chunks {
	return &chunks{cache: cache, slots: make(chan struct{}, blobSlots),
		calls: make(map[[32]byte]*chunkCall), waiting: make(map[uint64]chan *protocol.BlobData)}
}

// serveBlob answers a device's BlobGet in the background.
func (r *Relay) serveBlob(d *device, g *protocol.BlobGet) {
	if d.blobs.Add(1) > maxDeviceBlobs {
		d.blobs.Add(-1)
		r.answerBlob(d, &protocol.BlobData{Req: g.Req, Err: fmt.Sprintf("busy: more than %d chunks asked at once", maxDeviceBlobs)}, nil)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx := d.conn.Context()
		select {
		case r.chunks.slots <- struct{}{}:
		case <-ctx.Done():
			d.blobs.Add(-1)
			return
		}
		release := func() {
			<-r.chunks.slots
			d.blobs.Add(-1)
		}
		reply := &protocol.BlobData{Req: g.Req}
		data, err := r.chunk(ctx, d, [32]byte(g.Hash))
		if err != nil {
			reply.Err = err.Error()
		} else {
			reply.Data = data
		}
		r.answerBlob(d, reply, release)
	}()
}

func (r *Relay) answerBlob(d *device, reply *protocol.BlobData, release func()) {
	b, err := protocol.Encode(reply)
	if err != nil {
		d.logger().Warn("encode chunk", zap.Error(err))
		if release != nil {
			release()
		}
		return
	}
	wire := protocol.AppendFrame(make([]byte, 0, 4+len(b)), b)
	if r.tamper != nil {
		wire = r.tamper(protocol.TypeBlobData, wire)
	}
	d.down.sendDone(wire, release)
}

// chunk returns the chunk named k: from the cache, from a fetch under way
// for another device, or fetched from the master on d's session.
func (r *Relay) chunk(ctx context.Context, d *device, k [32]byte) ([]byte, error) {
	c := r.chunks
	if c.cache != nil {
		if b := c.cache.get(k); b != nil {
			c.hits.Add(1)
			return b, nil
		}
	}
	c.mu.Lock()
	if call := c.calls[k]; call != nil {
		c.mu.Unlock()
		select {
		case <-call.done:
			if call.err == nil {
				c.shared.Add(1)
			}
			return call.data, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	call := &chunkCall{done: make(chan struct{})}
	c.calls[k] = call
	c.mu.Unlock()
	call.data, call.err = r.fetchUp(ctx, d, k)
	if call.err == nil && c.cache != nil {
		c.cache.put(k, call.data)
	}
	c.mu.Lock()
	delete(c.calls, k)
	c.mu.Unlock()
	close(call.done)
	return call.data, call.err
}

// fetchUp asks the master for chunk k on d's session and checks it. While
// the link is down, or when it ends before the answer, it waits for d's
// session to be back upstream and asks again, within blobUpTimeout: a WAN
// that drops costs the device's fetch the outage, not a failed ask and
// its backoff, and the chunks already cached are not fetched again.
func (r *Relay) fetchUp(ctx context.Context, d *device, k [32]byte) ([]byte, error) {
	deadline := time.NewTimer(blobUpTimeout)
	defer deadline.Stop()
	for {
		up, us, ready := d.upstream()
		if up == nil {
			select {
			case <-ready:
				continue
			case <-deadline.C:
				return nil, errNoUpstream
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		data, err := r.askUp(ctx, d, up, us, k, deadline.C)
		if errors.Is(err, errUpGone) {
			d.detach(up) // if the sender's failure has not yet
			continue
		}
		return data, err
	}
}

// errUpGone: the device's stream on the link ended before the answer.
var errUpGone = errors.New("the device's session upstream ended")

// askUp sends one BlobGet for k on the device's stream up and waits for
// the answer.
func (r *Relay) askUp(ctx context.Context, d *device, up *sender, us *quic.Stream, k [32]byte, deadline <-chan time.Time) ([]byte, error) {
	c := r.chunks
	ch := make(chan *protocol.BlobData, 1)
	c.mu.Lock()
	c.next++
	req := c.next
	c.waiting[req] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiting, req)
		c.mu.Unlock()
	}()
	b, err := protocol.Encode(&protocol.BlobGet{Req: req, Hash: k[:]})
	if err != nil {
		return nil, err
	}
	if !up.send(protocol.AppendFrame(nil, b)) {
		return nil, errUpGone
	}
	select {
	case ans := <-ch:
		if ans.Err != "" {
			return nil, errors.New(ans.Err) // as the master said it: the device reads its kind
		}
		if sha256.Sum256(ans.Data) != k {
			d.logger().Warn("the master's chunk does not match its hash; refused")
			return nil, errors.New("the chunk from upstream does not match its hash")
		}
		c.misses.Add(1)
		c.upBytes.Add(uint64(len(ans.Data)))
		return ans.Data, nil
	case <-deadline:
		return nil, fmt.Errorf("no chunk from the master within %s", blobUpTimeout)
	case <-us.Context().Done():
		// The stream's write side ends with it, and with the link.
		return nil, errUpGone
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// blobAnswer hands the master's BlobData to the fetch waiting for it; one
// nobody waits for (late) is dropped.
func (r *Relay) blobAnswer(d *protocol.BlobData) {
	c := r.chunks
	c.mu.Lock()
	ch := c.waiting[d.Req]
	delete(c.waiting, d.Req)
	c.mu.Unlock()
	if ch != nil {
		ch <- d
	}
}
