package master

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
)

// rawAgent is an agent speaking the protocol by hand, to send what a real
// agent sends only after a failure: the same return twice.
type rawAgent struct {
	conn *quic.Conn
	f    *protocol.Framer
	id   *protocol.Identity
}

func dialRaw(t *testing.T, tm *testMaster, name string) *rawAgent {
	t.Helper()
	id, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := quic.DialAddr(ctx, tm.Addr().String(), id.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial master: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := protocol.NewFramer(stream, protocol.DefaultMaxFrame)
	if err := f.Write(&protocol.Hello{ID: name, Version: "test", Caps: protocol.CapabilityVersion}); err != nil {
		t.Fatal(err)
	}
	msg, err := f.Read()
	if err != nil {
		t.Fatalf("read key status: %v", err)
	}
	if ks, ok := msg.(*protocol.KeyStatus); !ok || ks.Status != protocol.KeyAccepted {
		t.Fatalf("key status: got %#v, want accepted", msg)
	}
	return &rawAgent{conn: conn, f: f, id: id}
}

// readAck reads messages until an Ack and returns its seq.
func (r *rawAgent) readAck(t *testing.T) uint64 {
	t.Helper()
	for {
		msg, err := r.f.Read()
		if err != nil {
			t.Fatalf("read ack: %v", err)
		}
		if a, ok := msg.(*protocol.Ack); ok {
			return a.Seq
		}
	}
}

// TestDuplicateReturn: a return delivered twice (an outbox replayed after a
// lost ack) is acked each time, stored once, and fires its event once.
func TestDuplicateReturn(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	ra := dialRaw(t, tm, "dup1")
	jid := "20261123120000000001"
	body := &protocol.ReturnBody{ID: "dup1", JID: jid, Fun: "test.ping", Return: true, Success: true, Stamp: "s"}
	signed, err := protocol.SignReturn(ra.id.Priv, body)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := protocol.SignEvent(ra.id.Priv, &protocol.EventBody{ID: "dup1", Tag: "test/marker", Stamp: "s"})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		msg  protocol.Message
		ack  uint64
	}{
		{"first", &protocol.Return{Signed: signed.Signed, Seq: 1}, 1},
		{"same seq again", &protocol.Return{Signed: signed.Signed, Seq: 1}, 0},
		{"replayed under a new seq", &protocol.Return{Signed: signed.Signed, Seq: 2}, 2},
		{"no ack wanted", &protocol.Return{Signed: signed.Signed}, 0},
		{"event", &protocol.Event{Signed: ev.Signed, Seq: 3}, 3},
	}
	for _, s := range steps {
		if err := ra.f.Write(s.msg); err != nil {
			t.Fatalf("%s: send: %v", s.name, err)
		}
		if s.ack != 0 {
			if got := ra.readAck(t); got != s.ack {
				t.Errorf("%s: got ack %d, want %d", s.name, got, s.ack)
			}
		}
	}
	// The marker event was published after every return was handled.
	tm.events.wait(t, "test/marker", nil)
	n := 0
	for _, e := range tm.events.seen {
		if e.Tag == event.TagJobRet(jid, "dup1") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("got %d return events for one return sent four times, want 1", n)
	}
	rets, err := tm.cache.GetReturns(jid)
	if err != nil || len(rets) != 1 {
		t.Errorf("job cache returns of %s: got %v, %v, want 1", jid, rets, err)
	}
}

// TestReturnBurst: an agent's returns sent faster than a commit takes are
// stored (the session's saver commits those waiting together), announced
// in the order they came, the event after them published after them, and
// the ack reaches the last seq only once everything before it is stored.
func TestReturnBurst(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	ra := dialRaw(t, tm, "burst1")
	const n = 300
	jids := make([]string, n)
	for i := range jids {
		jids[i] = fmt.Sprintf("2026112312%010d", i+1)
		signed, err := protocol.SignReturn(ra.id.Priv, &protocol.ReturnBody{ID: "burst1", JID: jids[i], Fun: "test.ping",
			Return: true, Success: true, Stamp: "s"})
		if err != nil {
			t.Fatal(err)
		}
		if err := ra.f.Write(&protocol.Return{Signed: signed.Signed, Seq: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := protocol.SignEvent(ra.id.Priv, &protocol.EventBody{ID: "burst1", Tag: "test/after", Stamp: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.f.Write(&protocol.Event{Signed: ev.Signed, Seq: n + 1}); err != nil {
		t.Fatal(err)
	}
	for got := uint64(0); got < n+1; {
		a := ra.readAck(t)
		if a < got {
			t.Fatalf("ack went back from %d to %d", got, a)
		}
		got = a
		// Whatever an ack covers is in the job cache.
		for i := 0; i < int(min(got, n)); i++ {
			if rets, err := tm.cache.GetReturns(jids[i]); err != nil || rets["burst1"] == nil {
				t.Fatalf("ack %d covers the return of seq %d, not in the job cache (%v)", got, i+1, err)
			}
		}
	}
	tm.events.wait(t, "test/after", nil)
	next := 0
	for _, e := range tm.events.seen {
		switch {
		case next < n && e.Tag == event.TagJobRet(jids[next], "burst1"):
			next++
		case e.Tag == "test/after" && next != n:
			t.Fatalf("the event came after %d of the %d returns before it", next, n)
		}
	}
	if next != n {
		t.Errorf("return events in order: %d of %d", next, n)
	}
}
