package relay

// Proxy minions (relay: proxy:, relay/proxy): the relay is the agent of
// site devices that cannot run one. Each proxy minion has a session of its
// own with the master, on a stream of the relay's link like a device
// behind it, opened with a Hello that the relay makes for it:
//
//   - its key is one the relay made for it and keeps in
//     pki_dir/proxy/<id>.pem (Hello.Pub, with the key agreement signed by
//     it), and Hello.Proxy says so: the master binds the id to this relay
//     and lists the key as "proxied by" it (keys.Store.CheckProxy). The key
//     needs accepting like any other (halite-key -a), unless the master
//     auto-accepts;
//   - its returns are MAC-tagged with the session key agreed under it, as
//     a device's are, and go up in the link's batches (or on its stream).
//     The relay is its agent, so the relay's spool (store.go) is their
//     durable copy: each gets the next sequence number and waits there
//     until the master's Ack for it comes on the proxy minion's stream.
//     Every session of the relay's run opens with the same half of the key
//     agreement, so the master agrees the same MAC key
//     (protocol.Identity.SessionKX) and what waited across a link cut
//     still verifies: it goes up first when the session is back, and the
//     master's replay rule and job cache (one return per jid and id) keep
//     it from being announced twice. The Hello is kept in the spool as a
//     device's is, so that what a stopped relay held goes up when it
//     starts again (resume.go), before the proxy minion's new session;
//   - jobs come on the link's control stream: fanOut matches the proxy
//     minions' grains as it matches its devices', and runs each call in a
//     goroutine of its own, bounded by the call's timeout.
//
// An idle proxy minion costs no goroutine: on its stream the master sends
// nothing once the key is accepted, save the acks of its returns, an Error
// when it ends the session (with a stop to the stream's read side, which
// cancels the stream's context), and the second KeyStatus of a pending
// key. One loop (proxyLoop) sweeps the streams now and then with a read
// that does not wait (of those with a pending key, returns waiting or a
// cancelled context: readProxy), and opens again the sessions that ended.
// Nor does it hold a logger, its key or its grains: proxySession.log adds
// its id to the relay's logger's entries, the key signs the run's key
// agreement once and is dropped, and the grains are made from what the
// device said when a Hello or a job needs them (proxy.Minion.GrainsWith).

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/relay/proxy"
)

// proxyCalls bounds the calls one proxy minion runs at once; a job past it
// is answered at once that the device is busy.
const proxyCalls = 8

// proxySweep is how often proxyLoop reads the proxy minions' streams, and
// proxyRetry how often it opens again the sessions that are down.
var (
	proxySweep = 2 * time.Second
	proxyRetry = 15 * time.Second
)

// Proxy session states.
const (
	proxyDown    = iota // no session
	proxyPending        // the key waits for the master's decision on the held stream
	proxyUp             // accepted: jobs run
)

// proxySession is one proxy minion and its session with the master.
type proxySession struct {
	m *proxy.Minion
	// dynamic: added at run time by the master (dynproxy.go), not by the
	// config; removed: taken out since, its session ending.
	dynamic bool
	removed atomic.Bool
	// priv is the proxy minion's key until it signed the run's half of
	// the key agreement (openProxy): every session of the run opens with
	// that half and signature, and the key (with the expansion of it that
	// crypto/ed25519 caches as long as it lives) is not kept.
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	// rlog is the relay's logger: p.log adds the proxy minion's id to
	// each entry, rather than a logger of its own (zap's With clones the
	// encoder and its buffer: 1.3 KiB a proxy minion, idle).
	rlog *zap.Logger

	running atomic.Int32 // calls running now
	// ran holds the ids of the last jobs it ran (firstRun), under mu.
	ran [4]string

	// dev is the proxy minion as the relay's spool knows it: its returns
	// wait there (dev.pending) until the master acknowledges them.
	dev *device

	mu sync.Mutex
	// devGrains are what the device said of itself (asked: once it was
	// asked): the proxy minion's grains are made from them when needed
	// (proxy.Minion.GrainsWith), not kept.
	devGrains map[string]any
	asked     bool
	state     int
	l         *link
	s         *quic.Stream
	// kx is the relay's run's half of the key agreement: every session
	// of the run opens with it, so that the MAC key stays the same.
	kx           *protocol.KX
	kxPub, kxSig []byte // kx's public half, signed with priv
	mac          []byte // the MAC key agreed under kx; kept between sessions once known
	late         []byte // grains too large for the Hello, while pending
	seq          uint64 // of the last return
	saved        bool   // the Hello under kx is kept in the spool
	rbuf         []byte // bytes of a frame not yet whole (proxyLoop)
	wmu          sync.Mutex
}

// newProxies makes the relay's proxy minions, with their keys: the
// config's entries, then the run-time ones the master added (dynproxy.go).
func (r *Relay) newProxies() error {
	c := r.o.Config
	r.proxyByID = make(map[string]*proxySession, len(c.Relay.Proxies))
	for _, e := range c.Relay.Proxies {
		p, err := r.makeProxy(e)
		if err != nil {
			return err
		}
		r.proxies = append(r.proxies, p)
		r.proxyByID[e.ID] = p
	}
	return r.loadDynamic()
}

// makeProxy makes the proxy minion of entry e, with its key.
func (r *Relay) makeProxy(e config.Proxy) (*proxySession, error) {
	c := r.o.Config
	if e.ID == c.ID {
		return nil, fmt.Errorf("proxy minion %s (line %d): a proxy minion may not use the relay's own id", e.ID, e.Line)
	}
	dir := filepath.Join(c.PkiDir, "proxy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proxy minions' keys: %w", err)
	}
	if r.proxyHTTP == nil {
		r.proxyHTTP = proxy.NewHTTPClient()
	}
	m, err := proxy.New(proxy.Options{Entry: e, Relay: c.ID, PkiDir: c.PkiDir, Version: r.o.Version,
		Pillar: r.o.Pillar, HTTP: r.proxyHTTP})
	if err != nil {
		return nil, err
	}
	priv, _, err := protocol.LoadOrCreateKey(dir, e.ID)
	if err != nil {
		return nil, fmt.Errorf("proxy minion %s: key: %w", e.ID, err)
	}
	p := &proxySession{m: m, priv: priv, pub: priv.Public().(ed25519.PublicKey), rlog: r.log}
	p.dev = &device{id: e.ID, proxy: true, log: r.log}
	return p, nil
}

// log logs msg at lvl, with p's id.
func (p *proxySession) log(lvl zapcore.Level, msg string, fields ...zap.Field) {
	if ce := p.rlog.Check(lvl, msg); ce != nil {
		ce.Write(append(fields, zap.String("proxy", p.m.ID()))...)
	}
}

// proxyList returns the relay's proxy minions now (they may be added and
// removed at run time: dynproxy.go).
func (r *Relay) proxyList() []*proxySession {
	r.proxyMu.RLock()
	defer r.proxyMu.RUnlock()
	return slices.Clone(r.proxies)
}

// proxyOf returns the proxy minion of id, or nil.
func (r *Relay) proxyOf(id string) *proxySession {
	r.proxyMu.RLock()
	defer r.proxyMu.RUnlock()
	return r.proxyByID[id]
}

// proxyLoop keeps the proxy minions' sessions until ctx ends: it opens
// them on each new link, reads what the master sent on them, and opens
// again those that ended.
func (r *Relay) proxyLoop(ctx context.Context) error {
	sweep := time.NewTicker(proxySweep)
	defer sweep.Stop()
	var lastLink *link
	var lastTry time.Time
	bulk := false
	for {
		l := r.link.Load()
		if l != nil && (l != lastLink || time.Since(lastTry) >= proxyRetry) {
			lastLink, lastTry = l, time.Now()
			bulk = r.openProxies(ctx, l) >= proxyBulk
		} else if bulk {
			// Opening many sessions at once (the relay's start, its
			// link back) leaves its garbage behind: each Hello and key
			// agreement encoded, the device asked for its grains, the
			// handshakes' frames, the workers' stacks, the connected
			// events sent up (and, at start, the keys read or made).
			// The idle relay then allocates too little to make the
			// runtime collect and return it for minutes: it would stay
			// resident, as much as the proxy minions' own state again
			// (GOGC's headroom). One collection, a few ms, returns it,
			// a sweep after the sessions opened.
			bulk = false
			debug.FreeOSMemory()
		}
		select {
		case <-ctx.Done():
			for _, p := range r.proxyList() {
				p.down(nil)
			}
			return nil
		case <-sweep.C:
		case <-r.linkChanged:
		case <-r.proxyAdded:
			lastTry = time.Time{} // open the new one's session now
		}
		for _, p := range r.proxyList() {
			r.readProxy(p)
		}
	}
}

// proxyBulk is the number of sessions opened at once past which
// proxyLoop returns their garbage to the system.
const proxyBulk = 100

// openProxies opens, on link l, the sessions of the proxy minions that
// have none, reattachWorkers at a time, and returns how many it tried.
func (r *Relay) openProxies(ctx context.Context, l *link) (n int) {
	todo := make(chan *proxySession)
	var wg sync.WaitGroup
	for range reattachWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range todo {
				if err := r.openProxy(ctx, l, p); err != nil {
					p.log(zap.DebugLevel, "proxy minion session", zap.Error(err))
				}
			}
		}()
	}
	defer wg.Wait()
	defer close(todo)
	for _, p := range r.proxyList() {
		if p.removed.Load() {
			continue
		}
		p.mu.Lock()
		st, on := p.state, p.l
		p.mu.Unlock()
		if st != proxyDown && on == l {
			continue
		}
		select {
		case todo <- p:
			n++
		case <-ctx.Done():
			return n
		case <-l.conn.Context().Done():
			return n
		}
	}
	return n
}

// openProxy opens p's session on l: its Hello, and the master's answer.
func (r *Relay) openProxy(ctx context.Context, l *link, p *proxySession) error {
	p.down(nil)
	p.mu.Lock()
	dg, asked := p.devGrains, p.asked
	p.mu.Unlock()
	if _, failed := dg["proxy_error"]; !asked || failed {
		// The device is asked once; its grains stay for the relay's run
		// (asked again at its next session if the device did not answer).
		dg = p.m.DeviceGrains(ctx)
		p.mu.Lock()
		p.devGrains, p.asked = dg, true
		p.mu.Unlock()
	}
	g := p.m.GrainsWith(dg)
	r.resumeProxyOrphan(ctx, l, p)
	id := p.m.ID()
	p.mu.Lock()
	if p.kx == nil {
		kx, err := protocol.NewKX()
		if err != nil {
			p.mu.Unlock()
			return err
		}
		p.kx, p.kxPub = kx, bytes.Clone(kx.Public()) // Public's copy has room for any curve's key
		p.kxSig = protocol.SignAgentKX(&protocol.Identity{Priv: p.priv, Pub: p.pub}, id, p.kxPub)
		p.priv = nil
	}
	hello := &protocol.Hello{ID: id, Version: r.o.Version, Caps: protocol.CapabilityVersion, Grains: g,
		KX: p.kxPub, KXSig: p.kxSig, Pub: p.pub, Proxy: true}
	p.mu.Unlock()
	hb, late, err := protocol.EncodeHello(hello)
	if err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	s, err := l.conn.OpenStreamSync(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	f := protocol.NewFramer(s, protocol.DefaultMaxFrame)
	s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	err = f.WriteFrame(hb)
	s.SetWriteDeadline(time.Time{})
	var msg protocol.Message
	if err == nil {
		s.SetReadDeadline(time.Now().Add(handshakeTimeout))
		msg, err = f.Read()
		s.SetReadDeadline(time.Time{})
	}
	if err != nil {
		s.CancelRead(0)
		s.CancelWrite(0)
		return fmt.Errorf("hello: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.saved {
		// For saveHello (proxyStatus), once a run: every session of
		// the run opens with the same key agreement.
		p.dev.mu.Lock()
		p.dev.hello = hello
		p.dev.mu.Unlock()
	}
	p.l, p.s, p.late = l, s, late
	if p.removed.Load() {
		// proxy.remove took it out while its session was opening: the
		// sweeps no longer see it, so the session ends here.
		p.closeLocked()
		return errors.New("removed")
	}
	return r.proxyStatus(p, msg)
}

// resumeProxyOrphan sends up what p's previous run (the relay's) left in
// the spool unacknowledged, in a session opened with that run's Hello
// (resumeOrphan), before p's first session of this run; p's returns of
// this run are numbered after it. A proxy minion does not come back by
// itself as a device does, so it is not left to resumeOrphans and its
// grace.
func (r *Relay) resumeProxyOrphan(ctx context.Context, l *link, p *proxySession) {
	var o *device
	for _, d := range r.store.orphanList() {
		if d.id == p.m.ID() {
			o = d
		}
	}
	if o == nil {
		return
	}
	last := r.store.lastSeq(o)
	if last == 0 {
		// Nothing waits: no session for it. One would race p's own at
		// the master, which attaches a session after answering its
		// Hello: the previous run's, closed at once, could replace p's
		// and end it, losing the jobs sent meanwhile.
		r.store.abandon(o)
		return
	}
	p.mu.Lock()
	p.seq = max(p.seq, last)
	p.mu.Unlock()
	r.resumeOrphan(ctx, l, o)
}

// proxyStatus handles the master's answer to p's Hello (p.mu held).
func (r *Relay) proxyStatus(p *proxySession, msg protocol.Message) error {
	st, ok := msg.(*protocol.KeyStatus)
	if !ok {
		p.closeLocked()
		if e, isErr := msg.(*protocol.Error); isErr {
			r.proxyRefused.Add(1)
			p.log(zap.WarnLevel, "the master refused the proxy minion", zap.Error(e.Err()))
			return e.Err()
		}
		return fmt.Errorf("master sent %s before the key status", msg.Type())
	}
	switch {
	case st.Status == protocol.KeyAccepted:
		half := p.kxPub
		if err := protocol.VerifyMasterKX(p.l.masterPub, p.m.ID(), half, st.KX, st.KXSig); err != nil {
			p.closeLocked()
			return fmt.Errorf("master key agreement: %w", err)
		}
		mac, err := p.kx.MACKey(st.KX, p.m.ID(), half, st.KX)
		if err != nil {
			p.closeLocked()
			return fmt.Errorf("master key agreement: %w", err)
		}
		if p.late != nil {
			if err := p.writeFrame(p.late); err != nil {
				p.closeLocked()
				return fmt.Errorf("send grains: %w", err)
			}
		}
		if p.mac != nil && !bytes.Equal(p.mac, mac) {
			// Not while the relay pins one master key: what waits was
			// tagged for a master that does not share this one's key,
			// and would end every session it is sent in.
			p.log(zap.WarnLevel, "the master agreed another MAC key than the one the waiting returns are tagged with; they are dropped")
			r.store.abandon(p.dev)
		}
		p.mac, p.late, p.state = mac, nil, proxyUp
		if !p.saved {
			if err := r.store.saveHello(p.dev); err != nil {
				p.log(zap.DebugLevel, "keep the proxy minion's hello for a restart", zap.Error(err))
			}
			p.saved = true
			p.dev.mu.Lock()
			p.dev.hello = nil // on disk: only a restart reads it
			p.dev.mu.Unlock()
		}
		// What waited (made while the link was down, or sent on a
		// link that went before the master acknowledged it) goes first.
		wires, lost := r.store.pending(p.dev)
		if lost {
			r.store.clearLost(p.dev)
		}
		for _, w := range wires {
			if err := r.sendProxyWire(p, w); err != nil {
				p.closeLocked()
				return fmt.Errorf("send returns kept: %w", err)
			}
		}
		p.log(zap.InfoLevel, "proxy minion connected", zap.Int("returns_kept", len(wires)))
		// Jobs the master published once it had attached the session
		// may have been fanned out before this status was read.
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.replayProxy(p)
		}()
		r.event("halite/relay/"+r.o.Config.ID+"/proxy/"+p.m.ID()+"/connected", map[string]any{"id": p.m.ID(), "proxytype": p.m.Type()})
		return nil
	case st.Status == protocol.KeyPending && st.Caps >= protocol.CapKeyNotify:
		// The master holds the stream and says when the key is decided.
		p.state = proxyPending
		p.log(zap.InfoLevel, "proxy minion key pending: accept it on the master (halite-key -a "+p.m.ID()+")")
		return nil
	}
	p.closeLocked()
	return fmt.Errorf("key %s by the master", st.Status)
}

// writeFrame writes one frame body on p's stream.
func (p *proxySession) writeFrame(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	s := p.s
	if s == nil {
		return errors.New("no session")
	}
	s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	_, err := s.Write(protocol.AppendFrame(make([]byte, 0, 4+len(b)), b))
	s.SetWriteDeadline(time.Time{})
	return err
}

// closeLocked ends p's session (p.mu held).
func (p *proxySession) closeLocked() {
	if p.s != nil {
		p.s.CancelRead(0)
		p.s.Close()
	}
	p.s, p.l, p.late, p.rbuf, p.state = nil, nil, nil, nil, proxyDown
}

// down ends p's session if it is on l (nil: whatever link).
func (p *proxySession) down(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l == nil || p.l == l {
		p.closeLocked()
	}
}

// maxProxyBuf bounds what the master may send on a proxy minion's stream
// before it makes a whole frame: a KeyStatus or an Error.
const maxProxyBuf = 64 << 10

// readProxy reads, without waiting, what the master sent on p's stream.
func (r *Relay) readProxy(p *proxySession) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.s
	if s == nil {
		return
	}
	if p.l.conn.Context().Err() != nil {
		p.closeLocked()
		return
	}
	if p.state == proxyPending && r.holdProxyStatus != nil && r.holdProxyStatus(p.m.ID()) {
		return
	}
	if p.state == proxyUp && len(p.rbuf) == 0 && s.Context().Err() == nil && r.store.lastSeq(p.dev) == 0 {
		// Idle: on an accepted proxy minion's stream the master sends
		// only the acks of its returns (none waits), and, when it ends
		// the session, an Error and a stop to the stream's read side,
		// which cancels its context. A read would cost a timer and its
		// wait (the deadline just ahead), each proxy minion each sweep.
		return
	}
	var buf [512]byte
	for {
		// A deadline just ahead: data already there is read, none is
		// waited for (quic-go checks the deadline before the data).
		s.SetReadDeadline(time.Now().Add(50 * time.Microsecond))
		n, err := s.Read(buf[:])
		p.rbuf = append(p.rbuf, buf[:n]...)
		if len(p.rbuf) > maxProxyBuf {
			p.log(zap.WarnLevel, "the master sent more than a proxy minion's stream may carry; session ended")
			p.closeLocked()
			return
		}
		for len(p.rbuf) >= 4 {
			size := int(binary.BigEndian.Uint32(p.rbuf))
			if size == 0 || size > maxProxyBuf {
				p.closeLocked()
				return
			}
			if len(p.rbuf) < 4+size {
				break
			}
			b := p.rbuf[4 : 4+size]
			p.rbuf = p.rbuf[4+size:]
			msg, derr := protocol.Decode(b)
			if derr != nil {
				p.log(zap.WarnLevel, "master sent a frame that does not decode", zap.Error(derr))
				continue
			}
			switch msg := msg.(type) {
			case *protocol.KeyStatus:
				if p.state == proxyPending {
					if err := r.proxyStatus(p, msg); err != nil {
						p.log(zap.InfoLevel, "proxy minion not accepted", zap.Error(err))
						return
					}
				}
			case *protocol.Ack:
				r.store.ack(p.dev, msg.Seq)
			case *protocol.Error:
				p.log(zap.InfoLevel, "the master ended the proxy minion's session", zap.Stringer("kind", msg.Kind), zap.String("msg", msg.Msg))
				p.closeLocked()
				r.event("halite/relay/"+r.o.Config.ID+"/proxy/"+p.m.ID()+"/disconnected", map[string]any{"id": p.m.ID(), "reason": msg.Msg})
				return
			}
		}
		if len(p.rbuf) == 0 {
			p.rbuf = nil
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			// EOF or reset: the master ended the session.
			p.closeLocked()
			return
		}
	}
}

// fanOutProxies runs job (opened: body) on the proxy minions it is for:
// those names lists, else those match accepts.
func (r *Relay) fanOutProxies(body *protocol.JobBody, want func(id string, grains map[string]any) bool) int {
	n := 0
	for _, p := range r.proxyList() {
		p.mu.Lock()
		st := p.state
		p.mu.Unlock()
		if st == proxyPending {
			// The master may have accepted the key since the last
			// sweep (and counts the minion up): its status waits on
			// the stream.
			r.readProxy(p)
		}
		p.mu.Lock()
		up, dg := p.state == proxyUp, p.devGrains
		p.mu.Unlock()
		if !up {
			continue
		}
		g := p.m.GrainsWith(dg)
		if !want(p.m.ID(), g) || !p.firstRun(body.JID) {
			continue
		}
		n++
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.runProxyJob(p, body, g)
		}()
	}
	return n
}

// runProxyJob runs one job on proxy minion p and sends its return.
func (r *Relay) runProxyJob(p *proxySession, body *protocol.JobBody, grains map[string]any) {
	defer r.proxyReturns.Add(1)
	var res proxy.Result
	if p.running.Add(1) > proxyCalls {
		res = proxy.Result{Return: fmt.Sprintf("ERROR: proxy minion %s is busy with %d calls; try again later", p.m.ID(), proxyCalls), Retcode: proxy.RetcodeGeneric}
	} else {
		res = r.callProxy(p, body, grains)
	}
	p.running.Add(-1)
	args := body.Arg
	if len(body.Kwarg) > 0 {
		kw := map[string]any{"__kwarg__": true}
		for k, v := range body.Kwarg {
			kw[k] = v
		}
		args = append(append([]any(nil), args...), kw)
	}
	rb := &protocol.ReturnBody{ID: p.m.ID(), JID: body.JID, Fun: body.Fun, FunArgs: args, Return: res.Return,
		Retcode: res.Retcode, Success: res.Success, Stamp: event.Stamp(time.Now())}
	if lost, err := r.keepProxyReturn(p, rb); err != nil {
		p.log(zap.WarnLevel, "proxy minion's return not sent", zap.String("jid", body.JID), zap.Error(err))
	} else {
		r.spoolDropped(lost)
	}
}

// keepProxyReturn tags rb with p's MAC key and the next seq, keeps it in
// the spool, and sends it now if p's session is up (else it goes when the
// session is back: proxyStatus). Under p.mu, so that returns go up in the
// order of their seqs, after those that waited. It returns the devices
// (p's record among them, perhaps) that lost items to make room.
func (r *Relay) keepProxyReturn(p *proxySession, rb *protocol.ReturnBody) ([]*device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mac == nil {
		// Impossible: a job runs only once a session was accepted.
		return nil, errors.New("no session key")
	}
	b, err := encodeProxyReturn(p.mac, p.seq+1, rb)
	if err == nil && len(b) > maxItemFrame {
		// As an agent does: the job is answered all the same, with a
		// failure saying why (it could not go up in a batch).
		rb.Return = fmt.Sprintf("return too large: %d bytes encoded, the limit is %d", len(b), maxItemFrame)
		rb.Retcode, rb.Success = proxy.RetcodeGeneric, false
		b, err = encodeProxyReturn(p.mac, p.seq+1, rb)
	}
	if err != nil {
		return nil, err
	}
	p.seq++
	wire := protocol.AppendFrame(make([]byte, 0, 4+len(b)), b)
	lost := r.store.put(p.dev, p.seq, wire)
	if p.state == proxyUp {
		if err := r.sendProxyWire(p, wire); err != nil {
			// Kept: it goes when the session is back.
			p.log(zap.DebugLevel, "proxy minion's return kept for the next session", zap.Error(err))
			p.closeLocked()
		}
	}
	return lost, nil
}

// encodeProxyReturn tags rb with mac and encodes it as Return seq.
func encodeProxyReturn(mac []byte, seq uint64, rb *protocol.ReturnBody) ([]byte, error) {
	ret, err := protocol.MACReturn(mac, rb)
	if err != nil {
		return nil, err
	}
	ret.Seq = seq
	return protocol.Encode(ret)
}

// sendProxyWire sends a kept return of p (a whole frame) on its session:
// in the link's next batch, or on its stream when the master takes none
// (p.mu held, session up).
func (r *Relay) sendProxyWire(p *proxySession, wire []byte) error {
	if p.l.batch != nil {
		p.l.batch.add(p.m.ID(), p.s.StreamID(), wire[4:])
		return nil
	}
	return p.writeFrame(wire[4:])
}

// callProxy runs the job's function(s) on p: a compound job (Funs) runs
// each in order and returns a map of their returns, as an agent does.
func (r *Relay) callProxy(p *proxySession, body *protocol.JobBody, grains map[string]any) proxy.Result {
	limit := time.Duration(body.Timeout) * time.Second
	// The call ends when the relay stops, or at its timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		select {
		case <-r.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	if len(body.Funs) == 0 {
		return p.m.Call(ctx, body.Fun, body.Arg, body.Kwarg, grains, limit)
	}
	out := make(map[string]any, len(body.Funs))
	rc := 0
	for i, fun := range body.Funs {
		var a []any
		var kw map[string]any
		if i < len(body.FunArgs) {
			a = body.FunArgs[i]
		}
		if i < len(body.FunKwargs) {
			kw = body.FunKwargs[i]
		}
		res := p.m.Call(ctx, fun, a, kw, grains, limit)
		out[fun] = res.Return
		if res.Retcode != 0 {
			rc = proxy.RetcodeGeneric
		}
	}
	return proxy.Result{Return: out, Retcode: rc, Success: rc == 0}
}

// proxyStats counts the proxy minions, and those whose session is up.
func (r *Relay) proxyStats() (all, up int) {
	l := r.proxyList()
	for _, p := range l {
		p.mu.Lock()
		if p.state == proxyUp {
			up++
		}
		p.mu.Unlock()
	}
	return len(l), up
}

// firstRun records jid as run by p and reports whether it was not already:
// a job fanned out and replayed (replayProxy) runs once, as an agent
// refuses a job id it took.
func (p *proxySession) firstRun(jid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, j := range p.ran {
		if j == jid {
			return false
		}
	}
	copy(p.ran[1:], p.ran[:len(p.ran)-1])
	p.ran[0] = jid
	return true
}
