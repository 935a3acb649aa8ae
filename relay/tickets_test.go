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

// helloAs connects to the relay at addr with ident's TLS key and the
// session cache tickets, and says Hello as id with its key agreement half
// signed by signer. It returns whether TLS resumed a session and the
// relay's first answer (a KeyStatus, or the Error it refused with).
func helloAs(t *testing.T, addr string, ident, signer *protocol.Identity, id string, tickets *protocol.SessionCache) (resumed bool, ans protocol.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tc := ident.ClientTLS(func(ed25519.PublicKey) error { return nil })
	tc.ClientSessionCache = tickets
	conn, err := quic.DialAddr(ctx, addr, tc, protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial the relay: %v", err)
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := protocol.NewFramer(s, 0)
	kx, err := protocol.NewKX()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(&protocol.Hello{ID: id, Version: "test", Caps: protocol.CapabilityVersion, KX: kx.Public(),
		KXSig: protocol.SignAgentKX(signer, id, kx.Public())}); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	s.SetReadDeadline(time.Now().Add(15 * time.Second))
	ans, err = f.Read()
	if err != nil {
		// A refusal may close the connection before a frame arrives:
		// the connection's error code is the kind.
		var ae *quic.ApplicationError
		if errors.As(err, &ae) {
			return conn.ConnectionState().TLS.DidResume, &protocol.Error{Kind: protocol.Kind(ae.ErrorCode), Msg: ae.ErrorMessage}
		}
		t.Fatalf("read the answer to hello: %v", err)
	}
	return conn.ConnectionState().TLS.DidResume, ans
}

// TestRelayResumedHelloSigned: a device that comes back resumes its TLS
// session with the relay (no certificates, no CertificateVerify), also
// after the relay restarted (its ticket keys are derived from its
// identity), and a resumed connection proves the device's key no less
// than a full one: a Hello whose key agreement is signed by another key
// than the one the ticket was issued to is refused with bad-signature,
// and the same connection signed by the device's own key is accepted.
func TestRelayResumedHelloSigned(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	dev, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	tickets := new(protocol.SessionCache)
	addr := tr.Addr().String()

	resumed, ans := helloAs(t, addr, dev, dev, "cam1", tickets)
	if resumed || !isAccepted(ans) {
		t.Fatalf("first connection: resumed %v, answer %+v; want a full handshake, accepted", resumed, ans)
	}

	resumed, ans = helloAs(t, addr, dev, other, "cam1", tickets)
	if !resumed {
		t.Fatal("second connection did not resume the TLS session")
	}
	if e, ok := ans.(*protocol.Error); !ok || e.Kind != protocol.KindBadSig {
		t.Fatalf("resumed connection, hello signed by another key: answer %+v, want an error of kind %v", ans, protocol.KindBadSig)
	}

	resumed, ans = helloAs(t, addr, dev, dev, "cam1", tickets)
	if !resumed || !isAccepted(ans) {
		t.Fatalf("third connection, hello signed by the device: resumed %v, answer %+v; want resumed, accepted", resumed, ans)
	}

	tr.restart(t)
	addr = tr.Addr().String()
	var again bool
	waitFor(t, "a resumed session accepted by the restarted relay", func() bool {
		resumed, ans := helloAs(t, addr, dev, dev, "cam1", tickets)
		if !isAccepted(ans) {
			return false // the link is not up yet
		}
		again = resumed
		return true
	})
	if !again {
		t.Error("after the relay restarted, the device's session did not resume")
	}
	// A stranger with its own key and the device's id, on a full
	// handshake: the master refuses it (the id's key is another).
	if resumed, ans := helloAs(t, addr, other, other, "cam1", new(protocol.SessionCache)); resumed || isAccepted(ans) {
		t.Errorf("stranger: resumed %v, answer %+v; want a full handshake, not accepted", resumed, ans)
	}
}

// TestRelayOlderDevice: a device of the oldest capability a relay serves
// (protocol.CapAck), which keeps no session ticket (a full handshake, as
// an agent from before resumption makes), is accepted through this relay
// and answers a job the master sends it: a MAC-tagged return it makes
// with the key agreed through the relay.
func TestRelayOlderDevice(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	ident, conn := dialNew(t, tr.Addr().String())
	if conn.ConnectionState().TLS.DidResume {
		t.Fatal("a device without a session cache resumed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := protocol.NewFramer(s, 0)
	kx, _ := protocol.NewKX()
	hello := &protocol.Hello{ID: "old1", Version: "0.4", Caps: protocol.CapAck, KX: kx.Public(),
		KXSig: protocol.SignAgentKX(ident, "old1", kx.Public())}
	if err := f.Write(hello); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	msg, err := f.Read()
	if err != nil {
		t.Fatalf("read key status: %v", err)
	}
	st, ok := msg.(*protocol.KeyStatus)
	if !ok || st.Status != protocol.KeyAccepted {
		t.Fatalf("answer to an older device's hello: %+v, want accepted", msg)
	}
	master := ed25519.PublicKey(st.MasterKey)
	if err := protocol.VerifyMasterKX(master, "old1", hello.KX, st.KX, st.KXSig); err != nil {
		t.Fatalf("master key agreement: %v", err)
	}
	mac, err := kx.MACKey(st.KX, "old1", hello.KX, st.KX)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		for {
			msg, err := f.Read()
			if err != nil {
				served <- err
				return
			}
			job, ok := msg.(*protocol.Job)
			if !ok {
				continue
			}
			body, err := job.Open(master)
			if err != nil {
				served <- err
				return
			}
			ret, err := protocol.MACReturn(mac, &protocol.ReturnBody{ID: "old1", JID: body.JID, Fun: body.Fun,
				Return: true, Success: true})
			if err == nil {
				err = f.Write(ret)
			}
			served <- err
			return
		}
	}()
	got, _, missing := tm.publish(t, "old1", "test.ping", 20)
	if want := []string{"old1"}; !cmp.Equal(got, want) {
		t.Errorf("test.ping to the older device: returned %v (missing %v), want %v", got, missing, want)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("older device: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Error("older device got no job")
	}
}
