package master

import (
	"context"
	"crypto/ed25519"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/protocol"
)

// pendingPeer is a raw agent connection whose key the master left pending.
type pendingPeer struct {
	conn   *quic.Conn
	stream *quic.Stream
	f      *protocol.Framer
	ident  *protocol.Identity
}

// helloPending dials tm as id with capability caps (and key agreement),
// reads the first answer and fails the test unless it is a pending status.
func helloPending(t *testing.T, tm *testMaster, id string, caps uint32) *pendingPeer {
	t.Helper()
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := quic.DialAddr(ctx, tm.Addr().String(), ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial master: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := protocol.NewFramer(stream, protocol.DefaultMaxFrame)
	kx, err := protocol.NewKX()
	if err != nil {
		t.Fatal(err)
	}
	hello := &protocol.Hello{ID: id, Version: "test", Caps: caps, KX: kx.Public(), KXSig: protocol.SignAgentKX(ident, id, kx.Public())}
	if err := f.Write(hello); err != nil {
		t.Fatal(err)
	}
	stream.SetReadDeadline(time.Now().Add(waitTimeout))
	msg, err := f.Read()
	if err != nil {
		t.Fatalf("hello %q: read the answer: %v", id, err)
	}
	wantStatus(t, "first answer of "+id, msg, protocol.KeyPending)
	return &pendingPeer{conn: conn, stream: stream, f: f, ident: ident}
}

// next reads the peer's next message within d; a closed stream or
// connection is a nil message and the error.
func (p *pendingPeer) next(d time.Duration) (protocol.Message, error) {
	p.stream.SetReadDeadline(time.Now().Add(d))
	defer p.stream.SetReadDeadline(time.Time{})
	return p.f.Read()
}

// TestPendingKeyToldAtOnce: an agent of capability 8 whose key is pending
// is held on its stream and told the operator's decision at once: a
// second KeyStatus, accepted (with the master's key agreement half) and
// then the session, or rejected; a deleted key ends the hold without one.
func TestPendingKeyToldAtOnce(t *testing.T) {
	tm := startMaster(t, nil, nil)
	tests := []struct {
		id, fun string
		want    string // the second status; "" for none (the stream ends)
	}{
		{"held-accept", "key.accept", protocol.KeyAccepted},
		{"held-reject", "key.reject", protocol.KeyRejected},
		{"held-delete", "key.delete", ""},
	}
	for _, tt := range tests {
		t.Run(tt.fun, func(t *testing.T) {
			p := helloPending(t, tm, tt.id, protocol.CapKeyNotify)
			waitFor(t, "agent held", func() bool { return tm.keyWait.held() == 1 })
			start := time.Now()
			tm.wheel(t, tt.fun, tt.id)
			msg, err := p.next(5 * time.Second)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("after %s: got %#v, want the stream to end", tt.fun, msg)
				}
				waitFor(t, "hold released", func() bool { return tm.keyWait.held() == 0 })
				return
			}
			if err != nil {
				t.Fatalf("after %s: read the second status: %v", tt.fun, err)
			}
			wantStatus(t, "second answer", msg, tt.want)
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("second status after %v, want at once", d)
			}
			if tt.want == protocol.KeyAccepted {
				if ks := msg.(*protocol.KeyStatus); ks.KX == nil {
					t.Errorf("accepted status without the master's key agreement half")
				}
				if err := p.f.Write(&protocol.Ping{Seq: 7}); err != nil {
					t.Fatal(err)
				}
				msg, err := p.next(5 * time.Second)
				if pong, ok := msg.(*protocol.Pong); err != nil || !ok || pong.Seq != 7 {
					t.Errorf("ping in the session after the held accept: got %#v, %v, want pong 7", msg, err)
				}
			}
			if got := tm.keyWait.held(); got != 0 {
				t.Errorf("held after the decision: got %d, want 0", got)
			}
		})
	}
}

// TestPendingOldAgentNotHeld: an agent older than capability 8 is answered
// pending and its stream closed at once, as before.
func TestPendingOldAgentNotHeld(t *testing.T) {
	tm := startMaster(t, nil, nil)
	p := helloPending(t, tm, "oldcam", protocol.CapKeyNotify-1)
	msg, err := p.next(5 * time.Second)
	if err == nil {
		t.Fatalf("got %#v, want the stream to end after the pending status", msg)
	}
	if got := tm.keyWait.held(); got != 0 {
		t.Errorf("held: got %d, want 0", got)
	}
}

// TestPendingHeldBounded: no more than the cap of pending agents are held;
// one beyond it is answered pending and let go at once (it retries after
// its wait), and a hold ends when its agent goes away.
func TestPendingHeldBounded(t *testing.T) {
	const max = 3
	tm := startMaster(t, nil, func(m *Master) { m.keyWait.max = max })
	var peers []*pendingPeer
	for i := range max {
		peers = append(peers, helloPending(t, tm, "crowd"+strconv.Itoa(i), protocol.CapKeyNotify))
	}
	waitFor(t, "agents held", func() bool { return tm.keyWait.held() == max })
	extra := helloPending(t, tm, "crowd-extra", protocol.CapKeyNotify)
	if msg, err := extra.next(5 * time.Second); err == nil {
		t.Fatalf("agent beyond the cap: got %#v, want its stream to end", msg)
	}
	if got := tm.keyWait.held(); got != max {
		t.Errorf("held: got %d, want %d", got, max)
	}
	peers[0].conn.CloseWithError(0, "")
	waitFor(t, "hold of a gone agent released", func() bool { return tm.keyWait.held() == max-1 })
	// The others are still held, and told.
	tm.wheel(t, "key.accept", "crowd1")
	msg, err := peers[1].next(5 * time.Second)
	if err != nil {
		t.Fatalf("held agent after accept: read: %v", err)
	}
	wantStatus(t, "held agent after accept", msg, protocol.KeyAccepted)
}
