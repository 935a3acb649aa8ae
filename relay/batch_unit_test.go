package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// quicPair is a QUIC connection on loopback: the batcher writes on a
// stream of client, the test reads what arrives at server.
type quicPair struct {
	client     *quic.Conn
	stream     *quic.Stream // the client's
	read       *protocol.Framer
	serverConn *quic.Conn
}

func newQUICPair(t *testing.T) *quicPair {
	t.Helper()
	sid, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cid, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", sid.ServerTLS(), protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	client, err := quic.DialAddr(ctx, ln.Addr().String(), cid.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.CloseWithError(0, "") })
	server, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.CloseWithError(0, "") })
	cs, err := client.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The server sees the stream once something is written on it.
	if _, err := cs.Write([]byte{0, 0, 0, 2, byte(protocol.TypePing), 0xa0}); err != nil {
		t.Fatal(err)
	}
	ss, err := server.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &quicPair{client: client, stream: cs, read: protocol.NewFramer(ss, 0), serverConn: server}
	if _, err := p.read.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	return p
}

// batcher starts a batcher on p's client stream, stopped at the test's end.
func (p *quicPair) batcher(t *testing.T, maxBytes int, delay time.Duration, limit int) *batcher {
	t.Helper()
	var sent atomic.Uint64
	b := newBatcher(p.client, protocol.NewFramer(p.stream, 0), p.stream, maxBytes, delay, limit, &sent)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b.run()
	}()
	t.Cleanup(func() {
		b.stop()
		wg.Wait()
	})
	return b
}

// next reads the next Batch.
func (p *quicPair) next(t *testing.T) (*protocol.Batch, int) {
	t.Helper()
	body, err := p.read.ReadFrame()
	if err != nil {
		t.Fatalf("read batch: %v", err)
	}
	m, err := protocol.DecodeLink(body)
	if err != nil {
		t.Fatalf("decode batch: %v", err)
	}
	return m.(*protocol.Batch), len(body)
}

// TestBatcherSizeBound: items queued at once go in batches of at most
// batch_max bytes (an item larger than that goes alone), in order; full
// batches go without waiting for the delay, the rest once it is over.
func TestBatcherSizeBound(t *testing.T) {
	p := newQUICPair(t)
	const maxBytes = 1024
	const delay = 2 * time.Second
	b := p.batcher(t, maxBytes, delay, 1<<20)
	start := time.Now()
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("dev%02d", i%3)
		frame := make([]byte, 100)
		if i == 20 {
			frame = make([]byte, 3000)
		}
		frame[0] = byte(i)
		b.add(id, 4, frame)
		want = append(want, fmt.Sprintf("%s/%d", id, i))
	}
	var got []string
	for n := 0; len(got) < len(want); n++ {
		batch, size := p.next(t)
		if len(batch.Items) > 1 && size > maxBytes {
			t.Errorf("batch of %d items is %d bytes, batch_max %d", len(batch.Items), size, maxBytes)
		}
		if took := time.Since(start); n == 0 && took >= delay {
			t.Errorf("the first, full, batch came after %v, the delay is %v", took, delay)
		}
		for _, it := range batch.Items {
			got = append(got, fmt.Sprintf("%s/%d", it.ID, it.Frame[0]))
		}
	}
	if took := time.Since(start); took < delay {
		t.Errorf("the last batch, not full, came after %v, before the delay %v", took, delay)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("items in the order they arrived:\n got %v\nwant %v", got, want)
	}
}

// TestBatcherDelayBound: a lone item goes batch_delay after it came.
func TestBatcherDelayBound(t *testing.T) {
	p := newQUICPair(t)
	const delay = 50 * time.Millisecond
	b := p.batcher(t, 64<<10, delay, 1<<20)
	for range 2 {
		start := time.Now()
		b.add("dev1", 4, []byte{byte(protocol.TypeEvent), 0xa0})
		batch, _ := p.next(t)
		if took := time.Since(start); took < delay || len(batch.Items) != 1 {
			t.Errorf("lone item: a batch of %d after %v, want 1 after at least %v", len(batch.Items), took, delay)
		}
	}
}

// TestBatcherQueueBound: when items come faster than the link takes them
// and the queue reaches its bound, the batcher gives the link up (the
// store sends them all again on the next one) instead of growing or
// blocking the device readers.
func TestBatcherQueueBound(t *testing.T) {
	p := newQUICPair(t)
	b := p.batcher(t, 1024, 0, 64<<10)
	frame := make([]byte, 1000)
	deadline := time.Now().Add(waitTimeout)
	for b.failed() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the batcher never gave up a link whose master reads nothing")
		}
		b.add("dev1", 4, frame) // must not block
	}
	select {
	case <-p.client.Context().Done():
	case <-time.After(waitTimeout):
		t.Fatal("the link's connection is still open")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(p.client.Context()); !errors.As(err, &ae) || protocol.Kind(ae.ErrorCode) != protocol.KindRateLimited {
		t.Errorf("link closed with %v, want kind %q", err, protocol.KindRateLimited)
	}
}

// TestBatchFitsFrame: the batches the relay makes fit the master's
// default frame limit: several items take at most batch_max bytes with
// their heads (TestBatcherSizeBound), and one item alone at most
// maxItemFrame and its overhead.
func TestBatchFitsFrame(t *testing.T) {
	if got := config.MaxRelayBatch + protocol.BatchItemOverhead; got > protocol.DefaultMaxFrame {
		t.Errorf("a batch of the largest batch_max is up to %d bytes, frame limit %d", got, protocol.DefaultMaxFrame)
	}
	if got := maxItemFrame + protocol.BatchItemOverhead; got > protocol.DefaultMaxFrame {
		t.Errorf("a batch of one largest item is up to %d bytes, frame limit %d", got, protocol.DefaultMaxFrame)
	}
}
