package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/protocol"
)

// rawDevice is a device speaking the protocol by hand, to send what a
// real agent never would.
type rawDevice struct {
	conn *quic.Conn
	f    *protocol.Framer
	id   *protocol.Identity
}

// dialNew connects to addr with a new identity, trusting any peer key;
// the test's cleanup closes the connection.
func dialNew(t *testing.T, addr string) (*protocol.Identity, *quic.Conn) {
	t.Helper()
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	return ident, conn
}

// dialRaw connects to tr as id and returns the relay's answer to Hello.
func dialRaw(t *testing.T, tr *testRelay, id string) (*rawDevice, protocol.Message) {
	t.Helper()
	ident, conn := dialNew(t, tr.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := protocol.NewFramer(s, 0)
	kx, _ := protocol.NewKX()
	if err := f.Write(&protocol.Hello{ID: id, Caps: protocol.CapabilityVersion, KX: kx.Public(),
		KXSig: protocol.SignAgentKX(ident, id, kx.Public())}); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	s.SetReadDeadline(time.Now().Add(waitTimeout))
	msg, err := f.Read()
	if err != nil {
		// The Error frame may be lost to the connection's close, which
		// carries its kind too.
		var ae *quic.ApplicationError
		if errors.As(err, &ae) {
			return &rawDevice{conn: conn, f: f, id: ident}, &protocol.Error{Kind: protocol.Kind(ae.ErrorCode), Msg: ae.ErrorMessage}
		}
		t.Fatalf("read hello answer: %v", err)
	}
	return &rawDevice{conn: conn, f: f, id: ident}, msg
}

// closedWith waits for the relay to close d's connection and returns the
// error kind it closed it with.
func (d *rawDevice) closedWith(t *testing.T) protocol.Kind {
	t.Helper()
	for {
		msg, err := d.f.Read()
		if err != nil {
			var ae *quic.ApplicationError
			if errors.As(err, &ae) {
				return protocol.Kind(ae.ErrorCode)
			}
			t.Fatalf("connection ended with %v, want an application error", err)
		}
		if e, ok := msg.(*protocol.Error); ok {
			return e.Kind
		}
	}
}

// TestRelayRefusesOtherID: a device may not claim the id of a device
// connected with another key, nor the id of an accepted device elsewhere.
func TestRelayRefusesOtherID(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil)

	d, msg := dialRaw(t, tr, "cam1")
	if e, ok := msg.(*protocol.Error); !ok || e.Kind != protocol.KindWrongID {
		t.Fatalf("second cam1 with another key: got %#v, want an error of kind %q", msg, protocol.KindWrongID)
	}
	_ = d
	tm.waitEvent(t, "halite/relay/r1/device/cam1/refused", nil)

	// cam2 is accepted with its own key; an impostor through the relay
	// is denied by the master.
	startDevice(t, tr, "cam2", nil)
	tm.waitEvent(t, "salt/minion/cam2/start", nil)
	waitFor(t, "cam2 behind the relay", func() bool { return tr.Stats().Devices == 2 })
	// cam2 connected here: the relay refuses the impostor itself.
	if _, msg := dialRaw(t, tr, "cam2"); !isErrKind(msg, protocol.KindWrongID) {
		t.Fatalf("impostor cam2: got %#v, want %q", msg, protocol.KindWrongID)
	}
	got, _, _ := tm.publish(t, "cam*", "test.ping", 20)
	if want := []string{"cam1", "cam2"}; !cmp.Equal(got, want) {
		t.Errorf("after the impostors: returned %v, want %v", got, want)
	}
}

func isErrKind(msg protocol.Message, k protocol.Kind) bool {
	e, ok := msg.(*protocol.Error)
	return ok && e.Kind == k
}

// TestRelayImpostorDenied: an id accepted with another key is denied by
// the master, through the relay.
func TestRelayImpostorDenied(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	cam, run := startDevice(t, tr, "cam1", nil)
	_ = cam
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cam1 gone from the relay", func() bool { return tr.Stats().Devices == 0 })
	_, msg := dialRaw(t, tr, "cam1")
	st, ok := msg.(*protocol.KeyStatus)
	if !ok || st.Status != protocol.KeyDenied {
		t.Fatalf("impostor cam1: got %#v, want key status denied", msg)
	}
	tm.waitEvent(t, "salt/auth", func(d map[string]any) bool {
		return d["id"] == "cam1" && d["relay"] == "r1" && d["result"] == false
	})
}

// TestRelayDropsMisbehaving: a device that sends a master's message, or a
// return made under another id, is dropped and reported; others go on.
func TestRelayDropsMisbehaving(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)

	bad, msg := dialRaw(t, tr, "bad1")
	if st, ok := msg.(*protocol.KeyStatus); !ok || st.Status != protocol.KeyAccepted {
		t.Fatalf("bad1 hello: got %#v, want accepted", msg)
	}
	job, _ := protocol.SignJob(bad.id.Priv, &protocol.JobBody{JID: "20261123000000000000", Tgt: "*", TgtType: "glob", Fun: "test.ping"})
	if err := bad.f.Write(job); err != nil {
		t.Fatal(err)
	}
	if k := bad.closedWith(t); k != protocol.KindForbidden {
		t.Errorf("device sending a job: closed with %q, want %q", k, protocol.KindForbidden)
	}
	tm.waitEvent(t, "halite/relay/r1/device/bad1/dropped", nil)

	bad2, _ := dialRaw(t, tr, "bad2")
	ret, _ := protocol.SignReturn(bad2.id.Priv, &protocol.ReturnBody{ID: "cam1", JID: "20261123000000000000", Fun: "test.ping", Return: true})
	ret.Seq = 1
	if err := bad2.f.Write(ret); err != nil {
		t.Fatal(err)
	}
	if k := bad2.closedWith(t); k != protocol.KindWrongID {
		t.Errorf("device sending another's return: closed with %q, want %q", k, protocol.KindWrongID)
	}
	got, _, _ := tm.publish(t, "cam1", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Errorf("cam1 after the others were dropped: returned %v, want %v", got, want)
	}
}
