package protocol

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
)

// listenQUIC listens on a loopback UDP port with Halite's configurations.
// It owns the quic.Transport (quic.ListenAddr would make one of its own)
// so that the test's cleanup closes it and every goroutine it started at
// once, rather than after closed connections time out.
func listenQUIC(t *testing.T, id *Identity) *quic.Listener {
	t.Helper()
	return listenQUICWith(t, id, QUICConfig())
}

// listenQUICWith is listenQUIC with the QUIC configuration qc.
func listenQUICWith(t *testing.T, id *Identity, qc *quic.Config) *quic.Listener {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatalf("listen udp: %v", err)
	}
	tr := &quic.Transport{Conn: udp}
	t.Cleanup(func() {
		tr.Close()
		udp.Close()
	})
	ln, err := tr.Listen(id.ServerTLS(), qc)
	if err != nil {
		t.Fatalf("listen quic: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestQUICHello runs the start of a real connection on loopback: QUIC with
// Halite's TLS and QUIC configurations, one stream, Hello and KeyStatus.
func TestQUICHello(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	master, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ln := listenQUIC(t, master)

	hello := &Hello{ID: "web01", Version: "1.0", Caps: CapabilityVersion, Grains: map[string]any{"os": "Debian"}}
	type result struct {
		hello Message
		key   ed25519.PublicKey
		err   error
	}
	served := make(chan result, 1)
	go func() {
		var r result
		defer func() { served <- r }()
		conn, err := ln.Accept(ctx)
		if err != nil {
			r.err = err
			return
		}
		if r.key, err = PeerKey(conn.ConnectionState().TLS); err != nil {
			r.err = err
			return
		}
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			r.err = err
			return
		}
		f := NewFramer(st, 0)
		if r.hello, r.err = f.Read(); r.err != nil {
			return
		}
		r.err = f.Write(&KeyStatus{Status: KeyAccepted, MasterID: "master1", Caps: CapabilityVersion})
		// Stay until the agent has read the answer and closed.
		<-conn.Context().Done()
	}()

	var pinned ed25519.PublicKey
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), agent.ClientTLS(func(k ed25519.PublicKey) error {
		pinned = k
		return nil
	}), QUICConfig())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if got := conn.ConnectionState().TLS.NegotiatedProtocol; got != ALPN {
		t.Errorf("ALPN: got %q, want %q", got, ALPN)
	}
	if !pinned.Equal(master.Pub) {
		t.Errorf("pin saw %s, want the master's %s", Fingerprint(pinned), Fingerprint(master.Pub))
	}
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := NewFramer(st, 0)
	if err := f.Write(hello); err != nil {
		t.Fatalf("write hello: %v", err)
	}
	got, err := f.Read()
	if err != nil {
		t.Fatalf("read key status: %v", err)
	}
	if diff := cmp.Diff(&KeyStatus{Status: KeyAccepted, MasterID: "master1", Caps: CapabilityVersion}, got); diff != "" {
		t.Errorf("key status (-want +got):\n%s", diff)
	}
	conn.CloseWithError(0, "done")

	r := <-served
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if diff := cmp.Diff(hello, r.hello); diff != "" {
		t.Errorf("server read hello (-want +got):\n%s", diff)
	}
	if !r.key.Equal(agent.Pub) {
		t.Errorf("server learnt key %s, want the agent's %s", Fingerprint(r.key), Fingerprint(agent.Pub))
	}
}

func TestQUICPinRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	master, _ := GenerateIdentity()
	agent, _ := GenerateIdentity()
	ln := listenQUIC(t, master)
	errPin := errors.New("not the pinned master")
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), agent.ClientTLS(func(ed25519.PublicKey) error { return errPin }), QUICConfig())
	if err == nil {
		conn.CloseWithError(0, "")
		t.Fatalf("dial: got a connection, want the pin to refuse it")
	}
}

// dialTraced dials ln as id with a copy of qc whose connection records its
// qlog events to trace; the test is skipped in a build without qlog, and the
// connection closed when it ends.
func dialTraced(ctx context.Context, t *testing.T, ln *quic.Listener, id *Identity, qc *quic.Config, trace qlogwriter.Trace) *quic.Conn {
	t.Helper()
	qc = qc.Clone()
	qc.Tracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return trace }
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), id.ClientTLS(nil), qc)
	if err != nil && strings.Contains(err.Error(), "no qlog") {
		t.Skipf("dial: %v (a build without qlog: -tags quicdebug)", err)
	}
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	return conn
}

// paramsTrace keeps the max_ack_delay a peer's transport parameters carried.
type paramsTrace struct{ got chan time.Duration }

func (p paramsTrace) AddProducer() qlogwriter.Recorder { return p }
func (paramsTrace) Close() error                       { return nil }
func (p paramsTrace) RecordEvent(e qlogwriter.Event) {
	if e, ok := e.(qlog.ParametersSet); ok && e.Initiator == qlog.InitiatorRemote {
		select {
		case p.got <- e.MaxAckDelay:
		default:
		}
	}
}

// TestQUICMaxAckDelay pins third_party/quic-go's 10-max-ack-delay.patch
// and 90-max-ack-delay-config.patch: a Halite peer advertises max_ack_delay
// 200 ms (its 25 ms ack timer and 175 ms for the timer firing late on a
// busy process), not quic-go's 26 ms, and an agent, or a listener for
// devices with Config.MaxAckDelay set, DeviceMaxAckDelay (500 ms), so that
// its peer's probe timeout does not resend jobs and returns that arrived
// (issue 20). Both ends are checked: what the dialer sees of the listener's
// parameters, and what the listener sees of the dialer's. It fails when
// go.mod builds with upstream quic-go.
func TestQUICMaxAckDelay(t *testing.T) {
	device := QUICConfig()
	device.MaxAckDelay = DeviceMaxAckDelay
	tiny := QUICConfig()
	tiny.MaxAckDelay = time.Millisecond // below the ack timer: raised to it
	for _, tc := range []struct {
		name                 string
		listen, dial         *quic.Config
		wantListen, wantDial time.Duration
	}{
		{"master and link", QUICConfig(), QUICConfig(), 200 * time.Millisecond, 200 * time.Millisecond},
		{"agent to a master", QUICConfig(), AgentQUICConfig(), 200 * time.Millisecond, 500 * time.Millisecond},
		{"agent to a relay", device, AgentQUICConfig(), 500 * time.Millisecond, 500 * time.Millisecond},
		{"below the ack timer", tiny, QUICConfig(), 26 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			master, _ := GenerateIdentity()
			agent, _ := GenerateIdentity()
			fromDialer := paramsTrace{got: make(chan time.Duration, 1)}
			lc := tc.listen.Clone()
			lc.Tracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return fromDialer }
			ln := listenQUICWith(t, master, lc)
			go func() {
				if conn, err := ln.Accept(ctx); err == nil {
					<-ctx.Done()
					conn.CloseWithError(0, "")
				}
			}()
			fromListener := paramsTrace{got: make(chan time.Duration, 1)}
			dialTraced(ctx, t, ln, agent, tc.dial, fromListener)
			for _, c := range []struct {
				what string
				got  chan time.Duration
				want time.Duration
			}{{"the listener's", fromListener.got, tc.wantListen}, {"the dialer's", fromDialer.got, tc.wantDial}} {
				select {
				case got := <-c.got:
					if got != c.want {
						t.Errorf("%s max_ack_delay: got %v, want %v", c.what, got, c.want)
					}
				case <-ctx.Done():
					t.Fatalf("no transport parameters: %s", c.what)
				}
			}
		})
	}
}

// TestQUICStateAfterHandshake: third_party/quic-go's
// 30-drop-tls-after-handshake.patch lets crypto/tls's connection go once the
// handshake is confirmed and keeps its ConnectionState; both ends must still
// see the peer's key and the ALPN after a round trip on a stream (by then
// the server has sent its session ticket and the client has HANDSHAKE_DONE).
// 40-connection-memory.patch keeps the peer's certificates as they came and
// parses them again when asked, and sends on the connection's goroutine
// with SendInline: both ways of sending, on each end.
func TestQUICStateAfterHandshake(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { testQUICStateAfterHandshake(t, inline) })
	}
}

func testQUICStateAfterHandshake(t *testing.T, inline bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	master, _ := GenerateIdentity()
	agent, _ := GenerateIdentity()
	lqc := QUICConfig()
	lqc.SendInline = inline
	ln := listenQUICWith(t, master, lqc)
	type result struct {
		key  ed25519.PublicKey
		alpn string
		err  error
	}
	served := make(chan result, 1)
	go func() {
		var r result
		defer func() { served <- r }()
		conn, err := ln.Accept(ctx)
		if err != nil {
			r.err = err
			return
		}
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			r.err = err
			return
		}
		f := NewFramer(st, 0)
		if _, r.err = f.Read(); r.err != nil {
			return
		}
		if r.err = f.Write(&KeyStatus{Status: KeyAccepted}); r.err != nil {
			return
		}
		<-conn.Context().Done()
		cs := conn.ConnectionState().TLS
		r.alpn = cs.NegotiatedProtocol
		r.key, r.err = PeerKey(cs)
	}()
	qc := AgentQUICConfig()
	qc.SendInline = inline
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), agent.ClientTLS(nil), qc)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := NewFramer(st, 0)
	if err := f.Write(&Hello{ID: "web01", Caps: CapabilityVersion}); err != nil {
		t.Fatalf("write hello: %v", err)
	}
	if _, err := f.Read(); err != nil {
		t.Fatalf("read key status: %v", err)
	}
	cs := conn.ConnectionState().TLS
	if key, err := PeerKey(cs); err != nil || !key.Equal(master.Pub) {
		t.Errorf("client: peer key %v, %v; want the master's", key, err)
	}
	if !cs.HandshakeComplete || cs.NegotiatedProtocol != ALPN {
		t.Errorf("client: handshake complete %v, ALPN %q; want true, %q", cs.HandshakeComplete, cs.NegotiatedProtocol, ALPN)
	}
	conn.CloseWithError(0, "done")
	r := <-served
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if !r.key.Equal(agent.Pub) || r.alpn != ALPN {
		t.Errorf("server: peer key %s, ALPN %q; want the agent's %s, %q", Fingerprint(r.key), r.alpn, Fingerprint(agent.Pub), ALPN)
	}
}

// TestQUICStreamContext: a send stream's context (made when first asked
// for, tools/quicfork/70-idle-connection-memory.patch) ends as it did
// when every stream made one at once: asked for before Close, after Close,
// or after the peer stopped reading (STOP_SENDING), with the same cause.
func TestQUICStreamContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client, server := pumpPair(t, ctx, 3)
	done := func(c context.Context) error {
		t.Helper()
		select {
		case <-c.Done():
			return context.Cause(c)
		case <-ctx.Done():
			t.Fatal("the stream's context did not end")
			return nil
		}
	}

	before := client[0].Context()
	if err := before.Err(); err != nil {
		t.Fatalf("an open stream's context: %v", err)
	}
	client[0].Close()
	if err := done(before); !errors.Is(err, quic.ErrStreamClosed) {
		t.Errorf("asked for before Close: cause %v, want ErrStreamClosed", err)
	}

	client[1].Close()
	if err := done(client[1].Context()); !errors.Is(err, quic.ErrStreamClosed) {
		t.Errorf("asked for after Close: cause %v, want ErrStreamClosed", err)
	}

	server[2].CancelRead(5)
	deadline := time.Now().Add(5 * time.Second)
	for client[2].Context().Err() == nil && time.Now().Before(deadline) {
		client[2].Write([]byte{0}) // what brings the STOP_SENDING back
		time.Sleep(10 * time.Millisecond)
	}
	var se *quic.StreamError
	if err := done(client[2].Context()); !errors.As(err, &se) || se.ErrorCode != 5 || !se.Remote {
		t.Errorf("after the peer's STOP_SENDING: cause %v, want a remote stream error 5", err)
	}
}

// TestQUICMaxHandshakes pins tools/quicfork/80-handshake-limit.patch: a
// listener with MaxHandshakes 1 never has two connections in their
// handshake at once (each server handshake here takes 300 ms), drops the
// Initials that would begin another (OnHandshakeDropped), and every client
// still gets through, its QUIC sending its Initial again. Without the
// bound the same dials overlap.
func TestQUICMaxHandshakes(t *testing.T) {
	for _, limit := range []int{1, 0} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			server, err := GenerateIdentity()
			if err != nil {
				t.Fatal(err)
			}
			var inHandshake, most, dropped atomic.Int32
			tc := server.ServerTLS()
			tc.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
				n := inHandshake.Add(1)
				defer inHandshake.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(300 * time.Millisecond)
				return nil, nil
			}
			qc := QUICConfig()
			qc.MaxHandshakes = limit
			qc.OnHandshakeDropped = func() { dropped.Add(1) }
			udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			tr := &quic.Transport{Conn: udp}
			defer udp.Close()
			defer tr.Close()
			ln, err := tr.Listen(tc, qc)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			go func() {
				for {
					conn, err := ln.Accept(ctx)
					if err != nil {
						return
					}
					defer conn.CloseWithError(0, "")
				}
			}()
			const clients = 3
			errs := make(chan error, clients)
			for range clients {
				go func() {
					client, err := GenerateIdentity()
					if err != nil {
						errs <- err
						return
					}
					conn, err := quic.DialAddr(ctx, ln.Addr().String(), client.ClientTLS(nil), AgentQUICConfig())
					if err == nil {
						conn.CloseWithError(0, "")
					}
					errs <- err
				}()
			}
			for range clients {
				if err := <-errs; err != nil {
					t.Errorf("dial: %v", err)
				}
			}
			switch {
			case limit == 1 && (most.Load() != 1 || dropped.Load() == 0):
				t.Errorf("MaxHandshakes 1: at most %d handshakes at once, %d Initials dropped; want 1 and some", most.Load(), dropped.Load())
			case limit == 0 && (most.Load() < 2 || dropped.Load() != 0):
				t.Errorf("no bound: at most %d handshakes at once, %d Initials dropped; want them to overlap, none dropped", most.Load(), dropped.Load())
			}
		})
	}
}

// mtuTrace keeps the largest path MTU a connection's own probes found.
type mtuTrace struct{ max *atomic.Int64 }

func (m mtuTrace) AddProducer() qlogwriter.Recorder { return m }
func (mtuTrace) Close() error                       { return nil }
func (m mtuTrace) RecordEvent(e qlogwriter.Event) {
	if e, ok := e.(qlog.MTUUpdated); ok && int64(e.Value) > m.max.Load() {
		m.max.Store(int64(e.Value))
	}
}

// TestQUICMTUDiscoveryOnBulk pins third_party/quic-go's
// 91-mtu-discovery-on-bulk.patch: a connection searches for a larger path
// MTU (padded PING probes, and their ACKs) only once it has sent a
// full-size packet. Jobs and returns one at a time never fill one, and
// their probes were a quarter of a round's datagrams behind relays (issue
// 20); a bulk transfer fills packets and still finds the larger MTU.
func TestQUICMTUDiscoveryOnBulk(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	master, _ := GenerateIdentity()
	agent, _ := GenerateIdentity()
	ln := listenQUIC(t, master)
	got := make(chan []byte, 1)
	go func() {
		conn, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer conn.CloseWithError(0, "")
		s, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		// Echo 100-byte messages, then take the rest whole.
		buf := make([]byte, 100)
		for range 200 {
			if _, err := io.ReadFull(s, buf); err != nil {
				return
			}
			if _, err := s.Write(buf); err != nil {
				return
			}
		}
		rest, _ := io.ReadAll(s)
		got <- rest
		<-ctx.Done()
	}()
	mtu := mtuTrace{max: new(atomic.Int64)}
	conn := dialTraced(ctx, t, ln, agent, QUICConfig(), mtu)
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 200 small round trips over more than 200 ms: upstream quic-go sends
	// a probe 5 RTTs after the last, at the next packet.
	msg, back := make([]byte, 100), make([]byte, 100)
	for i := range 200 {
		msg[0] = byte(i)
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(s, back); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if m := mtu.max.Load(); m != 0 {
		t.Fatalf("small messages only: the path MTU search ran (found %d)", m)
	}
	bulk := make([]byte, 4<<20)
	for i := range bulk {
		bulk[i] = byte(i * 7)
	}
	if _, err := s.Write(bulk); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case rest := <-got:
		if !bytes.Equal(rest, bulk) {
			t.Fatalf("the bulk arrived as %d bytes, not the %d sent", len(rest), len(bulk))
		}
	case <-ctx.Done():
		t.Fatal("the bulk transfer did not finish")
	}
	if m := mtu.max.Load(); m <= 1280 {
		t.Fatalf("after a bulk transfer the path MTU search found %d, want more than 1280", m)
	}
}
