package master

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/master/api"
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

// TestPendingAcceptEventOrder: a held agent accepted by key.accept connects
// at once; its salt/minion/<id>/start must come after the salt/key accept
// that let it in, as in Salt (the minion starts once its key is accepted).
// The wheel published salt/key after the key store had returned, by when the
// held agent had sometimes connected (e2e TestEvents saw the start first).
// Once per id per call: key.accept of two ids gives two events.
func TestPendingAcceptEventOrder(t *testing.T) {
	tm := startMaster(t, nil, nil)
	sub := tm.bus.Subscribe("salt/*", 1024)
	defer sub.Close()
	// The order itself: by the time a waiter hears of the accept, the
	// salt/key event is on the bus (Publish delivers before it returns).
	keySub := tm.bus.Subscribe("salt/key", 64)
	defer keySub.Close()
	helloPending(t, tm, "direct", protocol.CapKeyNotify-1)
	kw := tm.keyWait.add("direct")
	wheelErr := make(chan error, 1)
	go func() {
		_, err := tm.call(t, api.OpWheel, "key.accept", []any{"direct"}, nil)
		wheelErr <- err
	}()
	select {
	case c := <-kw.ch:
		if c.To != protocol.KeyAccepted {
			t.Fatalf("waiter told %+v, want accepted", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not told of the accept")
	}
	tm.keyWait.remove(kw)
	select {
	case ev := <-keySub.C():
		if ev.Data["id"] != "direct" || ev.Data["act"] != "accept" {
			t.Fatalf("first event %s %v, want salt/key accept of direct", ev.Tag, ev.Data)
		}
	default:
		t.Fatal("the waiter was told of the accept before salt/key was published")
	}
	if err := <-wheelErr; err != nil {
		t.Fatalf("key.accept direct: %v", err)
	}
	// Through a held agent's session.
	for round := range 3 {
		id := "order" + strconv.Itoa(round)
		p := helloPending(t, tm, id, protocol.CapabilityVersion)
		waitFor(t, "agent held", func() bool { return tm.keyWait.held() == 1 })
		tm.wheel(t, "key.accept", id)
		if msg, err := p.next(5 * time.Second); err != nil {
			t.Fatalf("%s: the accepted status: %v", id, err)
		} else {
			wantStatus(t, id, msg, protocol.KeyAccepted)
		}
		var seen []string
		deadline := time.After(5 * time.Second)
		for len(seen) < 2 {
			select {
			case ev := <-sub.C():
				switch ev.Tag {
				case "salt/key":
					if ev.Data["id"] == id {
						seen = append(seen, "key")
					}
				case "salt/minion/" + id + "/start":
					seen = append(seen, "start")
				}
			case <-deadline:
				t.Fatalf("%s: events %v, want salt/key then its start", id, seen)
			}
		}
		if seen[0] != "key" || seen[1] != "start" {
			t.Fatalf("%s: events in the order %v, want key then start", id, seen)
		}
		p.conn.CloseWithError(0, "")
		waitFor(t, "hold released", func() bool { return tm.keyWait.held() == 0 })
	}
	// Two pending ids, one call: one salt/key each, nothing twice.
	for _, id := range []string{"pair1", "pair2"} {
		helloPending(t, tm, id, protocol.CapKeyNotify-1)
	}
	tm.wheel(t, "key.accept", "pair*")
	got := map[string]int{}
	timeout := time.After(2 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-sub.C():
			if ev.Tag == "salt/key" {
				got[fmt.Sprint(ev.Data["id"])]++
			}
		case <-timeout:
			done = true
		}
	}
	if got["pair1"] != 1 || got["pair2"] != 1 || len(got) != 2 {
		t.Errorf("salt/key events of key.accept pair*: %v, want pair1 and pair2 once each", got)
	}
}
