package master

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/master/retroute"
	"github.com/halite-fleet/halite/protocol"
)

const (
	acceptLoops  = 4
	helloTimeout = 10 * time.Second
	// sendQueue is how many frames may wait for a slow agent before the
	// master drops its connection (the agent comes back and is served again).
	sendQueue = 1024
)

// runSessions is the sessions part: it serves agents and relays on ln
// until ctx ends (acceptLoops accept loops, a session per connection, a
// relay link per relay), with the loops every session relies on:
// acknowledgements (ackLoop), presence events (presenceLoop) and the
// returns held while the job cache cannot store them (retryHeld). The
// sessions themselves end when Run closes them; connWG counts them.
func (m *Master) runSessions(ctx context.Context, ln *quic.Listener) error {
	g, gctx := errgroup.WithContext(ctx)
	// Several accept loops: quic-go refuses connections whose handshake
	// is done while 32 wait to be accepted, and a fleet failing over to
	// this master arrives all at once, on a busy machine.
	for range acceptLoops {
		g.Go(func() error { return m.acceptAgents(gctx, ln) })
	}
	g.Go(func() error { return m.ackLoop(gctx) })
	g.Go(func() error { return m.presenceLoop(gctx) })
	g.Go(func() error { return m.retryHeld(gctx) })
	return g.Wait()
}

// acceptAgents accepts QUIC connections until ctx ends.
func (m *Master) acceptAgents(ctx context.Context, ln *quic.Listener) error {
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, quic.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("accept agent: %w", err)
		}
		m.connWG.Add(1)
		go func() {
			defer m.connWG.Done()
			m.serveAgent(ctx, conn)
		}()
	}
}

// session is one accepted agent's connection.
type session struct {
	id     string
	pub    ed25519.PublicKey
	caps   uint32   // the agent's own capability version (its Hello's)
	mac    []byte   // the session's MAC key, if the agent agreed one
	rets   []string // the agent's return: option, returners that exist
	conn   *quic.Conn
	stream *quic.Stream
	f      *protocol.Framer
	done   chan struct{}
	sendMu sync.Mutex // orders direct writes against the writer
	// out holds whole frames waiting for the writer, oldest first, at most
	// sendQueue; it grows as frames wait and is let go once empty. A
	// channel of sendQueue slots was 24 KiB a session for as long as it
	// lived, thousands of sessions behind relays, each scanned by every
	// collection (issue 20). Under sendMu.
	out    [][]byte
	queued int // frames in out or being written; under sendMu
	// The writer (writeOut) runs only while frames are queued: writing
	// says one runs, writerDone is closed when it returns, noWriter (the
	// session ended) that none may start. Under sendMu.
	writing    bool
	writerDone chan struct{}
	noWriter   bool
	// holdOut: the agent's KeyStatus is not written yet, so frames sent
	// meanwhile (a job published once the session is attached) are queued
	// for the writer, which starts once it is (releaseOut). Under sendMu.
	holdOut bool
	once    sync.Once
	log     *zap.Logger
	since   time.Time
	toAck   atomic.Uint64 // the highest seq stored or published, to acknowledge
	acked   uint64        // the highest seq acknowledged; only ackLoop touches it
	relay   *relayLink    // the relay the agent is behind; nil: a direct connection
	// handled: the highest seq handled by the session this one resumes
	// (registry.attach); items up to it are acknowledged, not handled again.
	handled uint64
	// streamID is the device's stream on its relay's link, which the
	// relay's batch items name.
	streamID quic.StreamID

	heldMu sync.Mutex
	held   []heldReturn // returns the job cache could not store yet (held.go)

	// BlobGets asked and not yet answered to QUIC (blobserve.go), and the
	// queued answers that hold a master-wide slot (under sendMu).
	blobPending atomic.Int32
	blobQueued  map[*byte]func()
}

// send sends a frame body to the agent without blocking; sendWire does
// the same for a whole frame (protocol.AppendFrame), so that a job framed
// once can go to every agent. When nothing is queued for the agent the
// frame is handed to QUIC at once (TryWriteAll copies it); otherwise, or
// when QUIC cannot take it now, it is queued for the session's writer,
// which keeps frames in order. A full queue means the agent does not keep
// up: its connection is dropped, and it comes back and is served again.
func (s *session) send(body []byte) bool {
	return s.sendWire(protocol.AppendFrame(make([]byte, 0, 4+len(body)), body))
}

func (s *session) sendWire(wire []byte) bool {
	ok, failKind, failMsg := s.trySend(wire)
	if !ok && failMsg != "" {
		s.close(failKind, failMsg)
	}
	return ok
}

// trySend hands wire to QUIC or the queue; on failure it says why the
// session should close (an empty message: it is closed already).
func (s *session) trySend(wire []byte) (ok bool, k protocol.Kind, msg string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	select {
	case <-s.done:
		return false, 0, ""
	default:
	}
	if s.queued == 0 && !s.holdOut {
		err := s.stream.TryWriteAll(wire)
		if err == nil {
			return true, 0, ""
		}
		if !errors.Is(err, quic.ErrWouldBlock) {
			return false, protocol.KindOther, "write: " + err.Error()
		}
	}
	if !s.enqueue(wire) {
		return false, protocol.KindRateLimited, "send queue full"
	}
	return true, 0, ""
}

// enqueue queues wire for the writer, starting it if none runs; false:
// the queue is full. The caller holds sendMu.
func (s *session) enqueue(wire []byte) bool {
	if len(s.out) >= sendQueue {
		return false
	}
	s.out = append(s.out, wire)
	s.queued++
	s.startWriter()
	return true
}

// startWriter starts the writer if frames wait and none runs or may not.
// The caller holds sendMu.
func (s *session) startWriter() {
	if s.queued > 0 && !s.writing && !s.noWriter && !s.holdOut {
		s.writing = true
		s.writerDone = make(chan struct{})
		go s.writeOut(s.writerDone)
	}
}

// releaseOut lets the frames held while the KeyStatus was written go out.
func (s *session) releaseOut() {
	s.sendMu.Lock()
	s.holdOut = false
	s.startWriter()
	s.sendMu.Unlock()
}

// nextOut takes the oldest frame from out (not empty), letting the queue's
// storage go once it is empty. The caller holds sendMu.
func (s *session) nextOut() []byte {
	b := s.out[0]
	s.out[0] = nil
	if s.out = s.out[1:]; len(s.out) == 0 {
		s.out = nil
	}
	return b
}

// ack records that the read loop has handled (stored, published) the
// agent's returns and events up to seq; ackLoop sends the acknowledgement.
// seq 0 asks for none. The read loop handles a connection's messages in
// order, so one ack covers everything before it.
func (s *session) ack(seq uint64) {
	for {
		cur := s.toAck.Load()
		if seq <= cur || s.toAck.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// replayed reports whether seq was handled by the session s resumes (sent
// again by a relay that did not get its ack); it is acknowledged again.
func (s *session) replayed(seq uint64) bool {
	if seq == 0 || seq > s.handled {
		return false
	}
	s.ack(seq)
	if ce := s.log.Check(zap.DebugLevel, "item handled before the relay's link dropped; not handled again"); ce != nil {
		ce.Write(zap.Uint64("seq", seq))
	}
	return true
}

// flushAck sends the session's pending acknowledgement, if any.
func (s *session) flushAck() {
	seq := s.ackable()
	if seq == 0 || seq <= s.acked {
		return
	}
	s.acked = seq
	if b, err := protocol.Encode(&protocol.Ack{Seq: seq}); err == nil {
		s.send(b)
	}
}

// ackInterval is how long an agent may wait for the acknowledgement of a
// stored return or event. Acks are sent in batches rather than one per
// message, so that they stay out of the burst of returns a fleet-wide job
// makes (one ack packet per return cost a 100-agent test.ping ~25 ms).
const ackInterval = 200 * time.Millisecond

// ackLoop acknowledges, every ackInterval, what each session has stored.
func (m *Master) ackLoop(ctx context.Context) error {
	t := time.NewTicker(ackInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for _, s := range m.minions.allSessions() {
			s.flushAck()
		}
	}
}

// isClosed reports whether the session has ended.
func (s *session) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *session) close(k protocol.Kind, msg string) { s.end(k, msg, true) }

// end is close; warn false leaves the warning out, for refusals that are
// counted and logged elsewhere.
func (s *session) end(k protocol.Kind, msg string, warn bool) {
	s.once.Do(func() {
		close(s.done)
		if warn && k != protocol.KindShutdown && k != protocol.KindOther {
			s.log.Warn("dropping agent", zap.Stringer("kind", k), zap.String("reason", msg))
		}
		// Tell the agent why, best effort, then close.
		if b, err := protocol.Encode(&protocol.Error{Kind: k, Msg: msg}); err == nil {
			s.stream.SetWriteDeadline(time.Now().Add(time.Second))
			s.f.WriteFrame(b)
		}
		if s.relay != nil {
			// A device behind a relay: its stream alone ends, the
			// relay's link and its other devices go on.
			s.stream.Close()
			s.stream.CancelRead(quic.StreamErrorCode(k))
			return
		}
		s.conn.CloseWithError(quic.ApplicationErrorCode(k), msg)
	})
}

func (m *Master) serveAgent(ctx context.Context, conn *quic.Conn) {
	log := m.log.With(zap.Stringer("remote", conn.RemoteAddr()))
	pub, err := protocol.PeerKey(conn.ConnectionState().TLS)
	if err != nil {
		log.Warn("agent handshake", zap.Error(err))
		conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindMalformed), err.Error())
		return
	}
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	stream, err := conn.AcceptStream(hctx)
	cancel()
	if err != nil {
		log.Debug("agent opened no stream", zap.Error(err))
		conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindUnexpected), "no stream")
		return
	}
	f := protocol.NewFramer(stream, m.maxFrame())
	hello, log, done, ok := m.readHello(f, stream, log, func(k protocol.Kind, text string) {
		conn.CloseWithError(quic.ApplicationErrorCode(k), text)
	})
	if !ok {
		return
	}
	s := &session{
		id: hello.ID, pub: pub, caps: hello.Caps, conn: conn, stream: stream, f: f,
		done: make(chan struct{}), log: log, since: time.Now(),
	}
	admitted := m.admitHeld(ctx, s, hello, "", nil, done, hello.Caps >= protocol.CapKeyNotify && !hello.Relay)
	done()
	if !admitted {
		// Let the agent read its status before the connection goes.
		select {
		case <-conn.Context().Done():
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
		conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindNotAccepted), "not accepted")
		return
	}
	if hello.Relay {
		m.serveRelayLink(ctx, s, hello.Caps)
		return
	}
	m.runSession(ctx, s, hello, func() {})
}

// helloSlots bounds the Hellos decoded and not yet answered (admit), over
// all connections, direct and relayed. A Hello comes before its sender's
// key is checked and is at most protocol.MaxHelloFrame bytes on the wire,
// but its CBOR decodes to up to some 70 times that (4.5 MB of empty
// maps): the slots bound what unauthenticated peers make the master hold
// to some 150 MB at worst, whatever their number. A slot is held for the
// decoding and the key store's decision, a millisecond or so; a Hello
// waits for one as QUIC holds its bytes meanwhile.
const helloSlots = 32

// readHello reads a stream's first message, which must be a Hello of at
// most protocol.MaxHelloFrame bytes, in one of the master's helloSlots;
// the caller calls done once it has answered the Hello, to give the slot
// back. On failure it tells the peer why, calls closeConn and returns ok
// false (and nothing to call).
func (m *Master) readHello(f *protocol.Framer, stream *quic.Stream, log *zap.Logger, closeConn func(protocol.Kind, string)) (hello *protocol.Hello, _ *zap.Logger, done func(), ok bool) {
	deadline := time.Now().Add(helloTimeout)
	stream.SetReadDeadline(deadline)
	b, err := f.ReadFrameMax(protocol.MaxHelloFrame)
	stream.SetReadDeadline(time.Time{})
	fail := func(k protocol.Kind, text string) {
		log.Warn("refusing agent", zap.Stringer("kind", k), zap.String("reason", text))
		if b, err := protocol.Encode(&protocol.Error{Kind: k, Msg: text}); err == nil {
			stream.SetWriteDeadline(time.Now().Add(time.Second))
			f.WriteFrame(b)
		}
		closeConn(k, text)
	}
	if err != nil {
		if protocol.KindOf(err) == protocol.KindTooLarge {
			err = fmt.Errorf("%w (grains that do not fit go in a Grains message once the key is accepted: upgrade the agent)", err)
		}
		fail(protocol.KindOf(err), "reading hello: "+err.Error())
		return nil, nil, nil, false
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case m.hellos <- struct{}{}:
	case <-t.C:
		fail(protocol.KindRateLimited, "the master is busy with other agents' hellos; try again later")
		return nil, nil, nil, false
	}
	release := func() { <-m.hellos }
	msg, err := protocol.Decode(b)
	if err != nil {
		release()
		fail(protocol.KindOf(err), "reading hello: "+err.Error())
		return nil, nil, nil, false
	}
	hello, ok = msg.(*protocol.Hello)
	if !ok {
		release()
		fail(protocol.KindUnexpected, "first message must be hello, got "+msg.Type().String())
		return nil, nil, nil, false
	}
	log = log.With(zap.String("id", hello.ID))
	if ce := log.Check(zap.DebugLevel, "recv"); ce != nil {
		ce.Write(zap.String("msg", "hello"), zap.String("version", hello.Version))
	}
	return hello, log, sync.OnceFunc(release), true
}

// admit runs the key store on the Hello of s, whose pub is the agent's key
// (s.pub), answers its KeyStatus and agrees the session MAC key. via is the
// relay the Hello came through ("": direct). It reports whether the key is
// accepted and the session may go on; otherwise the peer was told why (and,
// for a relayed device, its stream is closed).
//
// accepted, if not nil, is called once the key is accepted and the session
// complete (s.mac, s.rets), just before the status is sent: a relay sends
// the device's returns in batches on another stream as soon as it reads
// the status, and the session must be found by then.
//
// hold asks to leave the stream open after a pending status (admitHeld):
// pending then reports that it was.
func (m *Master) admit(ctx context.Context, s *session, hello *protocol.Hello, via string, accepted func(), hold bool) (ok, pending bool) {
	fail := func(k protocol.Kind, text string) (bool, bool) {
		s.log.Warn("refusing agent", zap.Stringer("kind", k), zap.String("reason", text))
		s.close(k, text)
		return false, false
	}
	if via != "" {
		// The relay is not trusted with identity: the device proves
		// that it holds the key it claims by signing its half.
		if hello.Relay || hello.KX == nil {
			return fail(protocol.KindForbidden, "a relayed hello must carry key agreement and may not open a relay link")
		}
		if err := protocol.VerifyAgentKX(s.pub, hello.ID, hello.KX, hello.KXSig); err != nil {
			return fail(protocol.KindBadSig, err.Error())
		}
	}
	// A key for an id the store does not know makes a new file: direct
	// connections are bounded per source address (a relay bounds its own
	// devices), and the store bounds pending keys.
	if via == "" && !m.keys.Known(hello.ID) && !m.newKeys.allow(s.conn.RemoteAddr()) {
		m.newKeys.refused(protocol.KindRateLimited, s.conn.RemoteAddr(), hello.ID)
		s.end(protocol.KindRateLimited, "too many new keys from this address (new_keys_per_address); try again later", false)
		return false, false
	}
	var dec keys.Decision
	var err error
	switch {
	case hello.Proxy && via == "":
		return fail(protocol.KindForbidden, "a proxy minion's hello comes through its relay only")
	case hello.Proxy:
		// The relay's link is allowed (relay_allow); the id is bound to
		// it (keys.Store.CheckProxy).
		dec, err = m.keys.CheckProxy(hello.ID, s.pub, via)
		if errors.Is(err, keys.ErrProxiedElsewhere) {
			return fail(protocol.KindForbidden, err.Error())
		}
	case m.keys.ProxiedBy(hello.ID) != "":
		// The key of a proxy minion is its relay's: it never comes as a
		// device's own.
		return fail(protocol.KindForbidden, hello.ID+" is a proxy minion of relay "+m.keys.ProxiedBy(hello.ID))
	default:
		dec, err = m.keys.Check(hello.ID, s.pub, via)
	}
	if err != nil {
		var pe *protocol.ProtoError
		if errors.As(err, &pe) && pe.Kind == protocol.KindPendingFull {
			m.newKeys.refused(pe.Kind, s.conn.RemoteAddr(), hello.ID)
			s.end(pe.Kind, pe.Msg, false)
			return false, false
		}
		return fail(protocol.KindOther, "key store: "+err.Error())
	}
	// Salt's salt/auth (_auth in salt/channel/server.py): result is True
	// for an accepted key and for a pending one (act pend), and act is
	// left out where Salt leaves it out.
	auth := map[string]any{
		"id": hello.ID, "result": dec.Status == protocol.KeyAccepted || dec.Status == protocol.KeyPending,
		"pub": string(protocol.EncodePublicKey(s.pub)),
	}
	if dec.Act != "" {
		auth["act"] = dec.Act
	}
	if via != "" {
		auth["relay"] = via
	}
	if hello.Proxy {
		auth["proxied_by"] = via
	}
	m.bus.Publish(event.TagAuth, auth)
	if hello.Relay && via == "" && dec.Status == protocol.KeyAccepted && !m.relayAllowed(hello.ID) {
		return fail(protocol.KindForbidden, "agent "+hello.ID+" may not act as a relay: the master's relay_allow does not list it")
	}
	status := &protocol.KeyStatus{Status: dec.Status, MasterID: m.name, Caps: protocol.CapabilityVersion}
	if via != "" {
		status.MasterKey = m.id.Pub
	}
	if dec.Status == protocol.KeyAccepted && hello.KX != nil {
		// A relayed Hello's half was verified above already.
		if via == "" {
			if err := protocol.VerifyAgentKX(s.pub, hello.ID, hello.KX, hello.KXSig); err != nil {
				return fail(protocol.KindBadSig, err.Error())
			}
		}
		kx, err := m.id.SessionKX(hello.ID, hello.KX)
		if err != nil {
			return fail(protocol.KindBadSig, err.Error())
		}
		status.KX = kx.Public()
		status.KXSig = protocol.SignMasterKX(m.id, hello.ID, hello.KX, status.KX)
		if s.mac, err = kx.MACKey(hello.KX, hello.ID, hello.KX, status.KX); err != nil {
			return fail(protocol.KindBadSig, err.Error())
		}
	}
	var replaced *session
	if dec.Status == protocol.KeyAccepted {
		s.rets = retroute.AgentReturners(s.log, hello.Returners)
		if accepted != nil {
			accepted()
		}
		if !hello.Relay {
			// The minion is connected before its status goes out: once
			// the agent (or the relay, for a proxy minion or a device
			// behind it) reads the status, a job may be published to
			// it, and publish sends only to attached sessions (a job
			// sent meanwhile was not sent, and never answered).
			if hello.Grains != nil {
				m.minions.setGrains(hello.ID, hello.Grains)
			}
			if via == "" {
				// A direct agent reads the status first: what is
				// published to it meanwhile waits in its queue.
				s.sendMu.Lock()
				s.holdOut = true
				s.sendMu.Unlock()
			}
			replaced = m.minions.attach(s)
			if m.afterAttach != nil && via == "" {
				m.afterAttach(s)
			}
		}
	}
	if err := s.f.Write(status); err != nil {
		s.log.Debug("send key status", zap.Error(err))
		s.close(protocol.KindOther, "")
		if dec.Status == protocol.KeyAccepted && !hello.Relay {
			m.minions.detach(s)
		}
		if replaced != nil {
			replaced.close(protocol.KindOther, "replaced by a new connection")
		}
		return false, false
	}
	s.releaseOut()
	if replaced != nil {
		replaced.close(protocol.KindOther, "replaced by a new connection")
	}
	if dec.Status != protocol.KeyAccepted {
		// The agent retries every acceptance_wait_time: once a minute
		// per id and status at info is enough.
		lvl := zap.DebugLevel
		if m.notAcceptedLog.Allow(hello.ID+"\x00"+dec.Status, time.Now()) {
			lvl = zap.InfoLevel
		}
		if ce := s.log.Check(lvl, "agent key not accepted"); ce != nil {
			ce.Write(zap.String("status", dec.Status), zap.String("finger", protocol.Fingerprint(s.pub)), zap.String("relay", via))
		}
		if hold && dec.Status == protocol.KeyPending {
			return false, true
		}
		s.stream.Close()
		if via != "" {
			s.stream.CancelRead(quic.StreamErrorCode(protocol.KindNotAccepted))
		}
		return false, false
	}
	return true, false
}

// runSession serves an accepted agent's session until it ends (admit
// attached it already, with the Hello's grains, before its status went
// out). A direct agent's session is served on the caller's goroutine and
// has ended when runSession returns; a relayed device's is read by a
// protocol.Pump, and runSession returns at once. Either way ended is
// called once the session has ended.
func (m *Master) runSession(ctx context.Context, s *session, hello *protocol.Hello, ended func()) {
	// A session whose handshake ended while the master began to stop
	// missed closeAll: close it here, or Run would wait for it (an agent
	// failing back keeps its connection alive).
	select {
	case <-m.closing:
		s.close(protocol.KindShutdown, "master shutting down")
	default:
	}
	s.log.Info("agent connected")
	stamp := event.Stamp(time.Now())
	startData := map[string]any{
		"id": hello.ID, "cmd": "_minion_event", "pretag": nil,
		"data": "Minion " + hello.ID + " started at " + time.Now().Format(time.ANSIC),
		"tag":  event.TagMinionStart(hello.ID), "_stamp": stamp,
	}
	m.bus.Publish(event.TagMinionStart(hello.ID), startData)
	m.bus.Publish(event.TagMinionStartOld, map[string]any{
		"id": hello.ID, "cmd": "_minion_event", "pretag": nil, "data": startData["data"],
		"tag": event.TagMinionStartOld, "_stamp": stamp,
	})

	if s.relay != nil {
		// A device behind a relay: read with no goroutine while it sends
		// nothing (protocol.Pump); the session ends on the pump's.
		rd := &reader{m: m, ctx: ctx, s: s}
		protocol.StartPump(s.stream, s.f, rd.frame, func(err error) {
			if err != nil {
				rd.fail(err)
			}
			rd.finish()
			m.endSession(s)
			ended()
		})
		return
	}
	m.readLoop(ctx, s)
	m.endSession(s)
	ended()
}

// endSession ends a session whose reading has ended.
func (m *Master) endSession(s *session) {
	s.close(protocol.KindOther, "")
	s.stopWriter()
	s.dropQueuedBlobs()
	m.minions.detach(s)
	s.log.Info("agent disconnected")
}

func (m *Master) maxFrame() int {
	if m.cfg.MaxFrame > 0 {
		return m.cfg.MaxFrame
	}
	return protocol.DefaultMaxFrame
}

// writeOut writes the session's queued frames, in order, and returns once
// none is left or the session ends (done is closed then): the next frame
// queued starts it again. No goroutine waits on an idle session's queue —
// a master holds a session per agent, thousands behind relays, and a
// parked goroutine costs its stack each.
func (s *session) writeOut(done chan struct{}) {
	defer close(done)
	for {
		s.sendMu.Lock()
		// queued counts what is in out: this is its only reader.
		if s.queued == 0 || s.isClosed() {
			s.writing = false
			s.sendMu.Unlock()
			return
		}
		b := s.nextOut()
		s.sendMu.Unlock()
		s.stream.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := s.stream.Write(b)
		s.sendMu.Lock()
		s.queued--
		release := s.blobQueued[&b[0]]
		delete(s.blobQueued, &b[0])
		s.sendMu.Unlock()
		if release != nil {
			release()
		}
		if err != nil {
			s.log.Debug("send to agent", zap.Error(err))
			s.close(protocol.KindOther, "")
			continue // ends the loop above
		}
		if ce := s.log.Check(zap.DebugLevel, "sent"); ce != nil {
			ce.Write(zap.Stringer("msg", protocol.Type(b[4])), zap.Int("bytes", len(b)))
		}
	}
}

// stopWriter keeps a writer from starting again and waits for the one
// running, if any: the session has ended.
func (s *session) stopWriter() {
	s.sendMu.Lock()
	s.noWriter = true
	w := s.writerDone
	s.sendMu.Unlock()
	if w != nil {
		<-w
	}
}

// reader handles what an agent sends on its session's stream, one frame
// at a time, in order: readLoop for a direct agent, a protocol.Pump for a
// device behind a relay.
//
// Returns and events, once opened, are stored and settled by saveLoop,
// in order, while the reading goes on: what arrives during a commit is
// stored together in the next one. The saver starts with the session's
// first return or event: a device behind a relay sends its returns in the
// relay's batches (handleBatch), and its session costs no saver.
type reader struct {
	m         *Master
	ctx       context.Context
	s         *session
	saves     chan received
	saverDone chan struct{}
}

// frame handles one frame; false: the session ends.
func (rd *reader) frame(b []byte) bool {
	m, s := rd.m, rd.s
	msg, err := protocol.Decode(b)
	if err != nil {
		rd.fail(err)
		return false
	}
	if ce := s.log.Check(zap.DebugLevel, "recv"); ce != nil {
		ce.Write(zap.Stringer("msg", msg.Type()))
	}
	switch msg.(type) {
	case *protocol.Return, *protocol.Event:
		in, ok, err := m.receive(s, msg)
		if err != nil {
			s.close(protocol.KindOf(err), err.Error())
			return false
		}
		if !ok {
			return true // a replay, acknowledged again
		}
		if rd.saves == nil {
			rd.saves = make(chan received, maxSaveBatch)
			rd.saverDone = make(chan struct{})
			go func() {
				defer close(rd.saverDone)
				m.saveLoop(s, rd.saves)
			}()
		}
		select {
		case rd.saves <- in:
			return true
		case <-s.done:
			return false
		}
	}
	if err := m.handle(rd.ctx, s, msg); err != nil {
		s.close(protocol.KindOf(err), err.Error())
		return false
	}
	return true
}

// fail ends the session for a read that failed (a frame that does not
// decode included).
func (rd *reader) fail(err error) {
	s := rd.s
	if s.isClosed() {
		return
	}
	if k := protocol.KindOf(err); k != protocol.KindOther {
		s.close(k, err.Error())
	} else {
		s.log.Debug("agent read", zap.Error(err))
	}
}

// finish waits for the saver, if one started, to store what it was given.
func (rd *reader) finish() {
	if rd.saves != nil {
		close(rd.saves)
		<-rd.saverDone
	}
}

// readLoop reads a direct agent's session until it ends.
func (m *Master) readLoop(ctx context.Context, s *session) {
	rd := &reader{m: m, ctx: ctx, s: s}
	defer rd.finish()
	for {
		b, err := s.f.ReadFrame()
		if err != nil {
			rd.fail(err)
			return
		}
		if !rd.frame(b) {
			return
		}
	}
}

// maxSaveBatch bounds the returns and events of one session saveLoop
// stores at once, and those opened and waiting for it.
const maxSaveBatch = 64

// saveLoop stores and settles the returns and events readLoop opened for
// s, in the order they came, until in is closed. Those waiting when it
// gets to them are stored with one call (one group commit of the job
// cache), so that an agent sending returns faster than a commit takes
// does not wait a commit for each, and its acknowledgement still covers
// only what is stored (settle, in order). The first item that cannot be
// settled ends the session, as in handle: nothing after it is
// acknowledged, and what was not stored yet is dropped (the agent sends
// it again on its next session).
func (m *Master) saveLoop(s *session, in <-chan received) {
	batch := make([]received, 0, maxSaveBatch)
	var rets []*protocol.ReturnBody
	var encs [][]byte
	ended := false
	for first := range in {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxSaveBatch {
			select {
			case r, ok := <-in:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		if ended {
			continue
		}
		rets, encs = rets[:0], encs[:0]
		for i := range batch {
			if batch[i].ret != nil {
				rets, encs = append(rets, batch[i].ret), append(encs, batch[i].enc)
			}
		}
		var isNew []bool
		var saveErrs []error
		if len(rets) > 0 {
			isNew, saveErrs = m.cache.SaveReturnsNew(rets, encs)
		}
		k := 0
		for i := range batch {
			var err error
			if batch[i].ret != nil {
				err = m.settle(s, &batch[i], isNew[k], saveErrs[k], ended)
				k++
			} else {
				err = m.settle(s, &batch[i], false, nil, ended)
			}
			if err != nil && !ended {
				ended = true
				s.close(protocol.KindOf(err), err.Error())
			}
		}
		clear(batch) // the bodies are not kept past their batch
	}
}

// handle processes one message of an accepted agent, arrived on its own
// stream. An error drops it. Returns and events go through receive and
// settle, as a relay's batch items do (handleBatch).
func (m *Master) handle(ctx context.Context, s *session, msg protocol.Message) error {
	switch msg := msg.(type) {
	case *protocol.Return, *protocol.Event:
		in, ok, err := m.receive(s, msg)
		if !ok {
			return err
		}
		var isNew bool
		var saveErr error
		if in.ret != nil {
			isNew, saveErr = m.cache.SaveReturnNew(in.ret, in.enc)
		}
		return m.settle(s, &in, isNew, saveErr, false)
	case *protocol.Grains:
		m.minions.setGrains(s.id, msg.Grains)
	case *protocol.MineGet:
		m.answerMineGet(s, msg)
	case *protocol.StateGet:
		m.answerStateGet(s, msg) // statecall.go
	case *protocol.BlobGet:
		m.answerBlobGet(s, msg) // blobserve.go
	case *protocol.PillarGet:
		m.answerPillarGet(s, msg) // pillarcall.go
	case *protocol.FileQuery:
		m.answerFileQuery(s, msg) // filequery.go
	case *protocol.Ping:
		if b, err := protocol.Encode(&protocol.Pong{Seq: msg.Seq}); err == nil {
			s.send(b)
		}
	case *protocol.Pong:
	case *protocol.Error:
		s.log.Info("agent closing", zap.Stringer("kind", msg.Kind), zap.String("msg", msg.Msg))
		return protocol.Errorf(protocol.KindOther, "agent closed")
	default:
		return protocol.Errorf(protocol.KindUnexpected, "agent may not send %s", msg.Type())
	}
	return nil
}

// received is one return or event of an agent, opened (receive).
type received struct {
	seq uint64
	ret *protocol.ReturnBody // a return,
	enc []byte               // its CBOR as it arrived;
	ev  *protocol.EventBody  // or an event
}

// receive opens msg, a Return or an Event of s's agent, however it
// arrived (its stream: handle; its relay's batch: handleBatch), and
// applies the replay rule. ok false with no error: msg was handled by the
// session s resumes (sent again by a relay that did not get its ack); it
// is acknowledged again, not handled twice. An error (msg does not verify,
// is not made by s's agent, whose key is no longer accepted, or is neither
// a return nor an event) ends the session.
func (m *Master) receive(s *session, msg protocol.Message) (in received, ok bool, err error) {
	switch msg := msg.(type) {
	case *protocol.Return:
		in.seq, in.enc = msg.Seq, msg.Body
		in.ret, err = m.openReturn(s, msg)
	case *protocol.Event:
		in.seq = msg.Seq
		in.ev, err = m.openEvent(s, msg)
	default:
		err = protocol.Errorf(protocol.KindUnexpected, "a relay's batch may carry returns and events, not %s", msg.Type())
	}
	if err != nil {
		return in, false, err
	}
	if s.replayed(in.seq) {
		return in, false, nil
	}
	return in, true, nil
}

// settle does what follows receive, however the message arrived: a return,
// saved by the caller (the job cache answered isNew, saveErr), is stored
// or held (returnSaved: its event and returners once stored), an event
// is published (agentEvent); then the message is acknowledged. A return
// neither stored nor held is not acknowledged (the agent keeps it and
// sends it again on its next session), and the error returned ends the
// session.
//
// ended says that the session was ended by an earlier message of the same
// batch: acks are cumulative, so nothing more is acknowledged; a stored
// return is announced all the same (sent again, it would be a replay and
// not be), an event is dropped (it comes again).
func (m *Master) settle(s *session, in *received, isNew bool, saveErr error, ended bool) error {
	if in.ret != nil {
		if err := m.returnSaved(s, in.seq, in.ret, in.enc, isNew, saveErr); err != nil && !ended {
			return notStored(err)
		}
	} else if !ended {
		m.agentEvent(s, in.ev)
	}
	if !ended {
		s.ack(in.seq)
	}
	return nil
}

// notStored is the error that ends a session whose return could not be
// stored.
func notStored(err error) error {
	return protocol.Errorf(protocol.KindOther, "return not stored: %v", err)
}

// openReturn checks a return of s's agent: its key is still accepted, and
// the body is tagged with the session's key (or signed) and made by it.
func (m *Master) openReturn(s *session, msg *protocol.Return) (*protocol.ReturnBody, error) {
	pub, ok := m.keys.AcceptedKey(s.id)
	if !ok {
		return nil, protocol.Errorf(protocol.KindNotAccepted, "key of %s is no longer accepted", s.id)
	}
	return msg.OpenWith(pub, s.mac, s.id)
}

// openEvent is openReturn for an event.
func (m *Master) openEvent(s *session, msg *protocol.Event) (*protocol.EventBody, error) {
	pub, ok := m.keys.AcceptedKey(s.id)
	if !ok {
		return nil, protocol.Errorf(protocol.KindNotAccepted, "key of %s is no longer accepted", s.id)
	}
	return msg.OpenWith(pub, s.mac, s.id)
}

// agentEvent publishes an opened event of s's agent on the bus. An event
// under a tag reserved for the master is refused and logged, but is no
// reason to drop the agent; the caller acknowledges it all the same (sent
// again, it would be refused again).
func (m *Master) agentEvent(s *session, b *protocol.EventBody) {
	if event.ReservedForMaster(b.Tag) {
		s.log.Warn("agent sent an event under a tag reserved for the master", zap.String("tag", b.Tag))
		return
	}
	if m.mineEvent(s.id, b.Tag, b.Data) {
		return
	}
	m.relayHeartbeat(s.id, b.Tag, b.Data)
	m.discoveryEvent(s.id, b.Tag, b.Data)
	data := b.Data
	if data == nil {
		data = map[string]any{}
	}
	ev := map[string]any{"id": s.id, "tag": b.Tag, "data": data, "_stamp": b.Stamp}
	if strings.HasPrefix(b.Tag, "salt/beacon/") {
		// Salt wraps a beacon's event in a second one on its way to
		// the master: the beacon's data, with the minion's id, are
		// data['data'] (Salt's reactor docs: data['data']['id']).
		// Many reactor files read the beacon's fields at the top
		// level instead (data['id'], data['memusage']), so they are
		// there too, where they do not hide the wrapper's own keys.
		inner := make(map[string]any, len(data)+1)
		for k, v := range data {
			inner[k] = v
			if _, taken := ev[k]; !taken {
				ev[k] = v
			}
		}
		inner["id"] = s.id
		ev["data"] = inner
	}
	m.bus.Publish(b.Tag, ev)
}

// handleReturn stores a verified return of s (seq; encoded is its CBOR,
// as it arrived) and fires its event once it is on disk. A return the job
// cache already held (an agent's outbox replayed after a reconnect) fires
// nothing: its event and returners ran the first time. A return the disk
// could not take is held (held.go) and announced once stored. A return
// refused for itself (jobcache.ErrBadReturn), or not stored when the held
// returns are at their bound, is announced all the same, and the error
// returned so that it is not acknowledged.
func (m *Master) handleReturn(s *session, seq uint64, b *protocol.ReturnBody, encoded []byte) error {
	isNew, err := m.cache.SaveReturnNew(b, encoded)
	return m.returnSaved(s, seq, b, encoded, isNew, err)
}

// returnSaved does what follows the saving of a return of s in
// handleReturn, given the job cache's answer (isNew, err); it returns nil
// for a return stored or held, else err.
func (m *Master) returnSaved(s *session, seq uint64, b *protocol.ReturnBody, encoded []byte, isNew bool, err error) error {
	if storageError(err) && m.hold(s, seq, b, encoded, err) {
		return nil
	}
	return m.announceReturn(b, s.rets, isNew, err)
}

// announceReturn fires the event of a return and runs its returners,
// unless it was stored before (isNew false). err is the job cache's, and
// is returned.
func (m *Master) announceReturn(b *protocol.ReturnBody, agentRets []string, isNew bool, err error) error {
	if err != nil {
		m.log.Error("save return", zap.String("jid", b.JID), zap.String("id", b.ID), zap.Error(err))
	} else if !isNew {
		if ce := m.log.Check(zap.DebugLevel, "duplicate return ignored"); ce != nil {
			ce.Write(zap.String("jid", b.JID), zap.String("id", b.ID))
		}
		return nil
	}
	if m.returners != nil {
		m.returners.Returned(b, agentRets)
	}
	m.metrics.returned(b.JID, time.Now())
	m.sawReturn(b)
	data := b.Map()
	if b.Stamp == "" {
		data["_stamp"] = event.Stamp(time.Now())
	}
	data["cmd"] = "_return"
	m.bus.Publish(event.TagJobRet(b.JID, b.ID), data)
	return err
}
