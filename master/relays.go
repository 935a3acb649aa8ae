package master

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// A relay link is a connection a relay (an accepted agent) opens with
// Hello.Relay set. Its first stream is the link's control stream: the
// master sends each job on it once per relay (protocol.Job, with IDs), and
// a relay of capability 6 sends its devices' returns and events on it in
// batches (protocol.Batch, handleBatch). Every further stream the relay
// opens is one device behind it: the device's own Hello (with its key in
// Hello.Pub, proved by its KXSig), then the device's session exactly as on
// a direct connection, MAC-tagged end to end with a key the relay cannot
// compute; a batch item is handled as if that stream had carried it.

// maxRelayStreams is the most device streams one connection may have open
// at once: the QUIC stream limit of the master's listener. A direct agent
// uses one stream; opening more gets nothing but its connection closed.
const maxRelayStreams = 1 << 14

// relayAdmit bounds the relayed Hellos the master handles at once, over
// all relays, so that a relay reconnecting with thousands of devices (or
// many relays after a master restart) queue in QUIC's flow control
// instead of in the key store.
const relayAdmit = 64

// relayAllowed reports whether the agent id may open a relay link: the
// master's relay_allow lists it, by id or glob. A relay carries its
// devices' Hellos and sees which devices exist and when they talk; it
// cannot forge what they send (MACs with keys it cannot compute) but may
// delay or drop it, so only agents the operator named are relays.
func (m *Master) relayAllowed(id string) bool {
	for _, p := range m.cfg.RelayAllow {
		if p == id || targets.MatchGlob(p, id) {
			return true
		}
	}
	return false
}

// relayLink is a connected relay's link.
type relayLink struct {
	id   string
	ctrl *session // the control stream; not a minion session
	caps uint32   // the relay's capability version (its Hello's)

	mu      sync.Mutex
	devices map[string]*session

	waits proxyWaits // proxy.* runners' requests (proxyctl.go)
}

// relays holds the connected relays' links, by relay id.
type relays struct {
	mu    sync.RWMutex
	links map[string]*relayLink
	sem   chan struct{}
}

func (r *relays) attach(l *relayLink) (old *relayLink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.links == nil {
		r.links = make(map[string]*relayLink)
	}
	old = r.links[l.id]
	r.links[l.id] = l
	return old
}

func (r *relays) detach(l *relayLink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.links[l.id] == l {
		delete(r.links, l.id)
	}
}

// closeAll closes every relay link (the master is shutting down).
func (r *relays) closeAll() {
	r.mu.RLock()
	all := make([]*relayLink, 0, len(r.links))
	for _, l := range r.links {
		all = append(all, l)
	}
	r.mu.RUnlock()
	for _, l := range all {
		l.ctrl.close(protocol.KindShutdown, "master shutting down")
	}
}

// list returns the connected relays and their device counts, by id.
func (r *relays) list() map[string]int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]int, len(r.links))
	for id, l := range r.links {
		l.mu.Lock()
		out[id] = len(l.devices)
		l.mu.Unlock()
	}
	return out
}

// serveRelayLink serves an accepted relay's link: ctrl is its control
// stream's session, caps the relay's capability version. It returns when the link ends, after its devices'
// sessions ended.
func (m *Master) serveRelayLink(ctx context.Context, ctrl *session, caps uint32) {
	l := &relayLink{id: ctrl.id, ctrl: ctrl, caps: caps, devices: make(map[string]*session)}
	if old := m.relays.attach(l); old != nil {
		old.ctrl.close(protocol.KindOther, "replaced by a new relay link")
	}
	ctrl.log.Info("relay connected")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.acceptDevices(ctx, l, &wg)
	}()
	m.readRelayCtrl(l)
	ctrl.close(protocol.KindOther, "")
	wg.Wait()
	ctrl.stopWriter()
	m.relays.detach(l)
	ctrl.log.Info("relay disconnected")
}

// readRelayCtrl reads the relay's control stream until it ends. A message
// that does not decode, a Batch included, ends the link: the relay is
// broken, and its devices come back through it once it reconnects.
func (m *Master) readRelayCtrl(l *relayLink) {
	ctrl := l.ctrl
	for {
		b, err := ctrl.f.ReadFrame()
		var msg protocol.Message
		if err == nil {
			msg, err = protocol.DecodeLink(b)
		}
		if err != nil {
			select {
			case <-ctrl.done:
				return
			default:
			}
			if k := protocol.KindOf(err); k != protocol.KindOther {
				ctrl.close(k, err.Error())
			}
			return
		}
		switch msg := msg.(type) {
		case *protocol.Ping:
			if b, err := protocol.Encode(&protocol.Pong{Seq: msg.Seq}); err == nil {
				ctrl.send(b)
			}
		case *protocol.Pong:
		case *protocol.Batch:
			m.handleBatch(l, msg)
		case *protocol.ProxyAnswer:
			l.waits.deliver(msg)
		case *protocol.Error:
			ctrl.log.Info("relay closing", zap.Stringer("kind", msg.Kind), zap.String("msg", msg.Msg))
			return
		default:
			ctrl.close(protocol.KindUnexpected, "a relay link's control stream may not carry "+msg.Type().String())
			return
		}
	}
}

// acceptDevices accepts the link's device streams until the link ends;
// each device's session runs in a goroutine counted in wg.
func (m *Master) acceptDevices(ctx context.Context, l *relayLink, wg *sync.WaitGroup) {
	conn := l.ctrl.conn
	for {
		select {
		case m.relays.sem <- struct{}{}:
		case <-ctx.Done():
			return
		case <-l.ctrl.done:
			return
		}
		stream, err := conn.AcceptStream(ctx)
		if err != nil {
			<-m.relays.sem
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				l.ctrl.log.Debug("relay link: accept stream", zap.Error(err))
			}
			return
		}
		wg.Add(1)
		go m.serveRelayed(ctx, l, stream, wg.Done)
	}
}

// serveRelayed serves one device behind relay l, on its stream. The
// admission slot taken by acceptDevices is given back once the device's
// Hello is handled.
func (m *Master) serveRelayed(ctx context.Context, l *relayLink, stream *quic.Stream, ended func()) {
	running := false // runSession has it, and calls ended
	defer func() {
		if !running {
			ended()
		}
	}()
	released := false
	release := func() {
		if !released {
			released = true
			<-m.relays.sem
		}
	}
	defer release()
	log := l.ctrl.log.With(zap.String("relay", l.id))
	// No read buffer: the session is read by a protocol.Pump, which
	// looks at the stream for what is there to read. Nor the buffer's
	// KiB, thousands of times over.
	f := protocol.NewStreamFramer(stream, m.maxFrame())
	hello, log, done, ok := m.readHello(f, stream, log, func(k protocol.Kind, _ string) {
		stream.Close()
		stream.CancelRead(quic.StreamErrorCode(k))
	})
	if !ok {
		return
	}
	defer done()
	s := &session{
		id: hello.ID, pub: hello.Pub, caps: hello.Caps, conn: l.ctrl.conn, stream: stream, f: f,
		done: make(chan struct{}), log: log, since: time.Now(), relay: l, streamID: stream.StreamID(),
	}
	if len(hello.Pub) != 32 {
		s.close(protocol.KindMalformed, "a relayed hello must carry the device's key")
		return
	}
	if hello.ID == l.id {
		s.close(protocol.KindWrongID, "a relay may not speak for itself as a device")
		return
	}
	// The session is the link's before the device's status goes out:
	// the relay may send a batch item for it on the control stream as
	// soon as it reads the status, and QUIC does not order the streams.
	register := func() {
		m.minions.resume(s)
		l.mu.Lock()
		l.devices[hello.ID] = s
		l.mu.Unlock()
	}
	unregister := func() {
		l.mu.Lock()
		if l.devices[hello.ID] == s {
			delete(l.devices, hello.ID)
		}
		l.mu.Unlock()
	}
	defer func() {
		if !running {
			unregister()
		}
	}()
	// A device is held while pending only if its relay waits for the
	// second status too (an older relay closes the stream at once).
	canHold := hello.Caps >= protocol.CapKeyNotify && l.caps >= protocol.CapKeyNotify
	if !m.admitHeld(ctx, s, hello, l.id, register, func() { done(); release() }, canHold) {
		return
	}
	done()
	release()
	running = true
	m.runSession(ctx, s, hello, func() {
		unregister()
		ended()
	})
}

// handleBatch handles a batch of returns and events of relay l's devices,
// each as if its device's stream had carried it (receive and settle, as
// handle does), in order, but with one job cache commit for all its
// returns: a batch holds hundreds of returns, and a commit each, one after
// the other, would take hundreds of milliseconds (BenchmarkRelayReturns:
// 1000 returns, 10 ms against 330).
//
// An item is for the session of the device it names only if that session
// is this link's and on the stream it names; otherwise (a device of
// another relay, an unknown id, a session that ended) it is ignored and
// not acknowledged, and the relay sends it again on its device's next
// session. A bad item (it does not decode, is no return or event, does not
// verify, is not stored) ends its device's session as handle would, after
// the device's items before it; the device's later items in the batch are
// not acknowledged, nor handled (except that a later return stored with
// the batch is announced: sent again, it would be a replay), and the
// other devices go on.
func (m *Master) handleBatch(l *relayLink, b *protocol.Batch) {
	sessions := make([]*session, len(b.Items))
	l.mu.Lock()
	for i := range b.Items {
		sessions[i] = l.devices[b.Items[i].ID]
	}
	l.mu.Unlock()

	// First open every item (receive); a device's first bad one ends its
	// part of the batch.
	type entry struct {
		s    *session
		in   received
		save int   // index of in.ret in rets
		bad  error // ends the session
	}
	entries := make([]entry, 0, len(b.Items))
	var rets []*protocol.ReturnBody
	var encs [][]byte
	var bad map[*session]bool
	for i := range b.Items {
		it, s := &b.Items[i], sessions[i]
		if s == nil || uint64(s.streamID) != it.Stream {
			if ce := l.ctrl.log.Check(zap.DebugLevel, "batch item for no session of this link; ignored"); ce != nil {
				ce.Write(zap.String("device", it.ID), zap.Uint64("stream", it.Stream))
			}
			continue
		}
		if bad[s] || s.isClosed() {
			continue
		}
		e := entry{s: s}
		msg, err := protocol.Decode(it.Frame)
		ok := false
		if err == nil {
			e.in, ok, err = m.receive(s, msg)
		}
		if err != nil {
			e.bad = err
			if bad == nil {
				bad = make(map[*session]bool)
			}
			bad[s] = true
		} else if !ok {
			continue // a replay, acknowledged again
		} else if e.in.ret != nil {
			e.save = len(rets)
			rets, encs = append(rets, e.in.ret), append(encs, e.in.enc)
		}
		entries = append(entries, e)
	}

	var isNew []bool
	var saveErrs []error
	if len(rets) > 0 {
		isNew, saveErrs = m.cache.SaveReturnsNew(rets, encs)
	}

	// Then, in order, what handle does once a message is opened (settle).
	// A session ended here acknowledges nothing more.
	ended := map[*session]bool{}
	for _, e := range entries {
		var err error
		switch {
		case e.bad != nil:
			err = e.bad
		case e.in.ret != nil:
			err = m.settle(e.s, &e.in, isNew[e.save], saveErrs[e.save], ended[e.s])
		default:
			err = m.settle(e.s, &e.in, false, nil, ended[e.s])
		}
		if err != nil && !ended[e.s] {
			ended[e.s] = true
			e.s.close(protocol.KindOf(err), err.Error())
		}
	}
}

// masterMatched reports whether the relay cannot evaluate tgt itself, so
// that the job sent to a relay must name the devices (nodegroups, pillar).
func masterMatched(tgt, tgtType, delim string) bool {
	switch tgtType {
	case "nodegroup", "pillar", "pillar_pcre", "pillar_exact":
		return true
	}
	mt, err := targets.Compile(tgt, tgtType, targets.Options{Delimiter: delim})
	return err != nil || mt.NeedsPillar()
}

// fanOut sends a signed job (its frame body) to the devices among ids that
// are behind relays: one Job per relay, on its link's control stream. It returns the ids it could
// not hand to a relay.
func (m *Master) fanOut(job *protocol.Job, byRelay map[*relayLink][]string, needIDs bool) (failed []string) {
	links := make([]*relayLink, 0, len(byRelay))
	for l := range byRelay {
		links = append(links, l)
	}
	sort.Slice(links, func(i, j int) bool { return links[i].id < links[j].id })
	var plain []byte
	for _, l := range links {
		rj := &protocol.Job{Signed: job.Signed}
		if needIDs {
			rj.IDs = byRelay[l]
		}
		var b []byte
		var err error
		if !needIDs && plain != nil {
			b = plain
		} else if b, err = protocol.Encode(rj); err != nil {
			m.log.Error("encode relay job", zap.Error(err))
			failed = append(failed, byRelay[l]...)
			continue
		}
		if !needIDs {
			plain = b
		}
		if !l.ctrl.send(b) {
			failed = append(failed, byRelay[l]...)
		}
	}
	return failed
}
