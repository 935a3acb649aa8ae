package relay

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
)

// device is one device agent's connection to the relay.
type device struct {
	id    string
	pub   ed25519.PublicKey
	conn  *quic.Conn
	down  *sender // frames to the device
	limit *bucket // its returns and events
	// log is the relay's logger (shared); logger adds the device's id and
	// address when something is logged.
	log *zap.Logger

	// proxy: the record of one of the relay's proxy minions in its spool
	// (proxies.go), not a connection: the spool holds the only copy of
	// its returns, and up is never set.
	proxy bool

	accepted atomic.Bool  // the master accepted its key: jobs may go to it
	blobs    atomic.Int32 // its BlobGets not yet answered (chunks.go)

	// The master's acks wait here before they go down (see ackDelay):
	// toAck is the highest seq acknowledged, ackSince when the oldest
	// ack not yet forwarded came (unix nanoseconds; 0: none waits).
	// ackMu orders the forwarding, so that acks go down in order.
	ackMu    sync.Mutex
	toAck    uint64
	acked    uint64
	ackSince atomic.Int64

	mu    sync.Mutex
	hello *protocol.Hello // as forwarded (with Pub), grains kept current once accepted
	// Until the master accepts the device's key, its Hello waits as the
	// frames to forward (protocol.EncodeHello: fwdLate holds the grains
	// that did not fit), and hello has no grains: an unauthenticated
	// device costs the relay its bytes, not their decoding.
	fwdHello, fwdLate []byte

	up       *sender // its stream on the link; nil while the link is down
	upStream *quic.Stream
	batch    *batcher // the link's, while up is set, if the master takes batches
	// upReady, if not nil, is closed when up is set next (a chunk fetch
	// waits on it for the link to come back).
	upReady chan struct{}

	// under the store's lock
	pending []*item
	lost    bool

	once sync.Once
}

// logger is d's logger: the relay's with the device's id and, for a
// connection, its address. It is made when something is logged, not kept:
// with a JSON core each With costs about 650 bytes for as long as it is
// held, and a relay holds thousands of devices that mostly log nothing.
func (d *device) logger() *zap.Logger {
	if d.conn == nil {
		return d.log.With(zap.String("device", d.id))
	}
	return d.log.With(zap.String("device", d.id), zap.Stringer("remote", d.conn.RemoteAddr()))
}

// upHello returns the frames that open d's session upstream: its Hello,
// and the Grains to send once the master accepted it (nil: none).
func (d *device) upHello() (hello, late []byte, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fwdHello != nil {
		return d.fwdHello, d.fwdLate, nil
	}
	return protocol.EncodeHello(d.hello)
}

// acceptedNow marks d accepted by the master: its grains are decoded from
// the frames it was forwarded with, for the relay's targeting.
func (d *device) acceptedNow() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fwdHello != nil {
		b := d.fwdHello
		if d.fwdLate != nil {
			b = d.fwdLate
		}
		msg, err := protocol.Decode(b)
		if err != nil {
			return fmt.Errorf("decode the device's grains: %w", err)
		}
		switch msg := msg.(type) {
		case *protocol.Hello:
			d.hello.Grains = msg.Grains
		case *protocol.Grains:
			d.hello.Grains = msg.Grains
		}
		d.fwdHello, d.fwdLate = nil, nil
	}
	d.accepted.Store(true)
	return nil
}

func (d *device) grains() map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hello.Grains
}

func (d *device) attached() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.up != nil
}

// noteAck records the master's ack of the device's items up to seq, to be
// forwarded with the next job or by ackLoop.
func (d *device) noteAck(seq uint64, now time.Time) {
	d.ackMu.Lock()
	if seq > d.toAck {
		d.toAck = seq
		if d.ackSince.Load() == 0 {
			d.ackSince.Store(now.UnixNano())
		}
	}
	d.ackMu.Unlock()
}

// sendWithAck sends wire (whole frames; nil: nothing but the ack) to the
// device, preceded in the same write by the ack that waits, if one does.
func (d *device) sendWithAck(wire []byte) bool {
	if d.ackSince.Load() == 0 {
		return wire == nil || d.down.send(wire)
	}
	d.ackMu.Lock()
	defer d.ackMu.Unlock()
	if d.toAck <= d.acked {
		return wire == nil || d.down.send(wire)
	}
	b, err := protocol.Encode(&protocol.Ack{Seq: d.toAck})
	if err != nil {
		return false
	}
	out := protocol.AppendFrame(make([]byte, 0, 4+len(b)+len(wire)), b)
	out = append(out, wire...)
	d.acked = d.toAck
	d.ackSince.Store(0)
	return d.down.send(out)
}

// upstream returns the device's stream on the link, or, while it has
// none, a channel closed when it gets one.
func (d *device) upstream() (*sender, *quic.Stream, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.up != nil {
		return d.up, d.upStream, nil
	}
	if d.upReady == nil {
		d.upReady = make(chan struct{})
	}
	return nil, nil, d.upReady
}

// detach forgets up as the device's upstream, if it still is.
func (d *device) detach(up *sender) {
	d.mu.Lock()
	if d.up == up {
		d.up, d.upStream, d.batch = nil, nil, nil
	}
	d.mu.Unlock()
	up.close()
}

// close tells the device why and closes its connection, and its stream on
// the link, so the master sees it go.
func (d *device) close(k protocol.Kind, msg string) {
	d.once.Do(func() {
		var last []byte
		if k != protocol.KindOther {
			if b, err := protocol.Encode(&protocol.Error{Kind: k, Msg: msg}); err == nil {
				last = protocol.AppendFrame(nil, b)
			}
		}
		d.down.closeWith(last)
		d.mu.Lock()
		up, us := d.up, d.upStream
		d.up, d.upStream, d.batch = nil, nil, nil
		d.mu.Unlock()
		if up != nil {
			up.close()
			us.CancelRead(quic.StreamErrorCode(protocol.KindOther))
			us.Close()
		}
		d.conn.CloseWithError(quic.ApplicationErrorCode(k), msg)
	})
}

// serveDevice serves one device connection until it ends.
func (r *Relay) serveDevice(ctx context.Context, conn *quic.Conn) {
	// The device's logger is made when something is logged (device.logger).
	log := func() *zap.Logger { return r.log.With(zap.Stringer("remote", conn.RemoteAddr())) }
	pub, err := protocol.PeerKey(conn.ConnectionState().TLS)
	if err != nil {
		conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindMalformed), err.Error())
		return
	}
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	stream, err := conn.AcceptStream(hctx)
	cancel()
	if err != nil {
		conn.CloseWithError(quic.ApplicationErrorCode(protocol.KindUnexpected), "no stream")
		return
	}
	f := protocol.NewStreamFramer(r.tap(stream), protocol.DefaultMaxFrame)
	refuse := func(k protocol.Kind, text string) {
		log().Warn("refusing device", zap.Stringer("kind", k), zap.String("reason", text))
		if b, err := protocol.Encode(&protocol.Error{Kind: k, Msg: text}); err == nil {
			stream.SetWriteDeadline(time.Now().Add(time.Second))
			f.WriteFrame(b)
		}
		conn.CloseWithError(quic.ApplicationErrorCode(k), text)
	}
	deadline := time.Now().Add(handshakeTimeout)
	stream.SetReadDeadline(deadline)
	b, err := f.ReadFrameMax(protocol.MaxHelloFrame)
	stream.SetReadDeadline(time.Time{})
	if err != nil {
		refuse(protocol.KindOf(err), "reading hello: "+err.Error())
		return
	}
	hello, fwd, late, err := r.decodeHello(b, pub, deadline)
	if err != nil {
		refuse(protocol.KindOf(err), err.Error())
		return
	}
	switch {
	case hello.Relay:
		refuse(protocol.KindForbidden, "relays do not chain: point this relay at the master")
		return
	case hello.KX == nil || hello.Caps < protocol.CapAck:
		refuse(protocol.KindVersion, "this agent is too old to work behind a relay: upgrade it")
		return
	case hello.ID == r.o.Config.ID:
		refuse(protocol.KindWrongID, "a device may not use the relay's own id")
		return
	case r.proxyOf(hello.ID) != nil:
		refuse(protocol.KindWrongID, "id "+hello.ID+" is a proxy minion of this relay")
		return
	}
	d := &device{id: hello.ID, pub: pub, conn: conn, hello: hello, fwdHello: fwd, fwdLate: late, log: r.log,
		limit: newBucket(r.conf.EventRate, r.conf.EventBurst)}
	d.down = newSender(stream, &r.wg, func() { d.close(protocol.KindRateLimited, "device does not keep up") })

	// One device per id, and only a device whose key the master accepted
	// holds one: until it answers, a device holds nothing (it counts
	// against max_devices), so a stranger who presents a device's id with
	// another key, connecting again and again, never keeps the device
	// out. While the device is connected here, with the key the master
	// accepted, another key under its id is refused at once. Otherwise
	// the master decides; a device's new connection replaces its old
	// one once accepted (below), and of two keys that race for an id, the
	// one the master accepts wins.
	r.mu.Lock()
	if old := r.devices[hello.ID]; old != nil && !old.pub.Equal(pub) {
		r.mu.Unlock()
		r.droppedDevices.Add(1)
		refuse(protocol.KindWrongID, "id "+hello.ID+" is connected here with another key")
		r.event(r.deviceTag(hello.ID, "refused"), map[string]any{"reason": "id claimed by another key",
			"finger": protocol.Fingerprint(pub)})
		return
	}
	if r.devices[hello.ID] == nil && len(r.devices)+r.handshaking >= r.conf.MaxDevices {
		r.mu.Unlock()
		refuse(protocol.KindRateLimited, "relay full (max_devices)")
		return
	}
	r.handshaking++
	r.mu.Unlock()
	handshook := sync.OnceFunc(func() {
		r.mu.Lock()
		r.handshaking--
		r.mu.Unlock()
	})
	defer handshook()
	// gone ends the device's session here; once the device's stream is
	// read by its pump, the pump's end calls it instead.
	gone := func() {
		d.close(protocol.KindOther, "")
		r.mu.Lock()
		if r.devices[d.id] == d {
			delete(r.devices, d.id)
		}
		r.mu.Unlock()
		r.store.forget(d, ctx.Err() != nil)
		if d.accepted.Load() {
			d.logger().Info("device disconnected")
			// Not while the relay stops: its agent's outbox is closing too,
			// and the master sees the relay go.
			if ctx.Err() == nil {
				r.event(r.deviceTag(d.id, "disconnected"), map[string]any{"id": d.id})
			}
		}
	}
	reading := false
	defer func() {
		if !reading {
			gone()
		}
	}()

	l := r.waitLink(ctx, conn)
	if l == nil {
		refuse(protocol.KindShutdown, "the relay cannot reach the master now; try again later")
		return
	}
	us, uf, ans, err := r.openUp(ctx, l, d)
	if err != nil {
		refuse(protocol.KindShutdown, "the relay cannot reach the master now; try again later")
		return
	}
	tell := func(ans protocol.Message) error {
		if st, ok := ans.(*protocol.KeyStatus); ok && st.Caps > protocol.CapabilityVersion {
			// The device may use what the master and this relay both
			// know: a request the relay did not know would drop it.
			c := *st
			c.Caps = protocol.CapabilityVersion
			ans = &c
		}
		b, err := protocol.Encode(ans)
		if err == nil {
			stream.SetWriteDeadline(time.Now().Add(handshakeTimeout))
			err = f.WriteFrame(b)
			stream.SetWriteDeadline(time.Time{})
		}
		return err
	}
	err = tell(ans)
	// A pending key, when the master and the device both can (capability
	// protocol.CapKeyNotify): the master holds the device's stream and
	// sends a second status once the key is decided; it goes on to the
	// device, which waits for it on its own connection.
	for st, ok := ans.(*protocol.KeyStatus); err == nil && ok && st.Status == protocol.KeyPending &&
		st.Caps >= protocol.CapKeyNotify && hello.Caps >= protocol.CapKeyNotify; st, ok = ans.(*protocol.KeyStatus) {
		if ans, err = r.awaitDecision(ctx, conn, d, us, uf); err == nil {
			err = tell(ans)
		}
	}
	if st, ok := ans.(*protocol.KeyStatus); err != nil || !ok || st.Status != protocol.KeyAccepted {
		us.CancelRead(0)
		us.Close()
		// Let the device read its status before the connection goes.
		stream.Close()
		select {
		case <-conn.Context().Done():
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
		}
		return
	}
	status := time.Now()
	if r.beforeTakeIn != nil {
		r.beforeTakeIn(d.id)
	}
	if err := d.acceptedNow(); err != nil {
		us.CancelRead(0)
		us.Close()
		refuse(protocol.KindMalformed, err.Error())
		return
	}
	// The id is this device's now: the master accepted its key. Another
	// connection under it (this device's previous one, or another key the
	// master accepted before) is replaced. Jobs fanned out while the
	// status was on its way go to it now (recent.go).
	old, missed := r.takeIn(d, status)
	for _, w := range missed {
		d.sendWithAck(w)
	}
	handshook()
	if old != nil {
		old.close(protocol.KindOther, "replaced by a new connection")
	}
	if err := r.store.saveHello(d); err != nil {
		d.logger().Debug("keep the device's hello for a restart", zap.Error(err))
	}
	r.attach(ctx, l, d, us, uf)
	d.logger().Info("device connected")
	r.event(r.deviceTag(d.id, "connected"), map[string]any{"id": d.id, "finger": protocol.Fingerprint(pub)})
	// The device is read for as long as it stays, with no goroutine of
	// its own while it sends nothing (protocol.Pump): a parked reader
	// costs its stack, and this one's grew with the handshake (Hello,
	// upstream, logs, events). One per device, paid thousands of times
	// over.
	reading = true
	r.wg.Add(1)
	protocol.StartWirePump(stream, f, func(wire []byte) bool { return r.deviceFrame(d, wire) }, func(err error) {
		defer r.wg.Done()
		defer gone()
		if err != nil {
			if k := protocol.KindOf(err); k != protocol.KindOther {
				r.dropDevice(d, k, err.Error())
			}
		}
	})
}

// helloSlots bounds the devices' Hellos the relay decodes at once. A
// Hello comes before the device's key is checked; it is at most
// protocol.MaxHelloFrame bytes on the wire but decodes to up to some 70
// times that. Each is encoded again at once into the frames to forward
// (what a device waiting for the master costs the relay), so a slot is
// held for microseconds.
const helloSlots = 4

// decodeHello decodes a device's Hello frame b in one of the relay's
// helloSlots, waiting for one until deadline, and returns it without its
// grains, with pub (the device's TLS key) set, and the frames to forward
// upstream (protocol.EncodeHello).
func (r *Relay) decodeHello(b []byte, pub ed25519.PublicKey, deadline time.Time) (hello *protocol.Hello, fwd, late []byte, err error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r.hellos <- struct{}{}:
	case <-t.C:
		return nil, nil, nil, protocol.Errorf(protocol.KindRateLimited, "the relay is busy with other devices' hellos; try again later")
	}
	defer func() { <-r.hellos }()
	msg, err := protocol.Decode(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading hello: %w", err)
	}
	hello, ok := msg.(*protocol.Hello)
	if !ok {
		return nil, nil, nil, protocol.Errorf(protocol.KindUnexpected, "first message must be hello, got %s", msg.Type())
	}
	hello.Pub = pub
	if fwd, late, err = protocol.EncodeHello(hello); err != nil {
		return nil, nil, nil, fmt.Errorf("forward hello: %w", err)
	}
	hello.Grains = nil
	return hello, fwd, late, nil
}

// dropDevice drops a device that sent what it may not; an event says why.
func (r *Relay) dropDevice(d *device, k protocol.Kind, why string) {
	r.droppedDevices.Add(1)
	d.logger().Warn("dropping device", zap.Stringer("kind", k), zap.String("reason", why))
	r.event(r.deviceTag(d.id, "dropped"), map[string]any{"id": d.id, "kind": k.String(), "reason": why})
	d.close(k, why)
}

// deviceFrame forwards one frame a device sent (its stream's pump calls
// it for each, in order). It reports false when the device is to be read
// no more: it sent what it may not (dropped), went away while throttled,
// or said it ends.
func (r *Relay) deviceFrame(d *device, wire []byte) bool {
	b := wire[4:] // the frame's body; wire is the whole frame, forwarded as it came
	drop := func(k protocol.Kind, why string) bool {
		r.dropDevice(d, k, why)
		return false
	}
	msg, err := protocol.Decode(b)
	if err != nil {
		return drop(protocol.KindOf(err), err.Error())
	}
	switch msg := msg.(type) {
	case *protocol.Return, *protocol.Event:
		if len(b) > maxItemFrame {
			// It could not go up in a batch; an agent never sends one.
			return drop(protocol.KindTooLarge, fmt.Sprintf("%s of %d bytes, limit %d", msg.Type(), len(b), maxItemFrame))
		}
		var body []byte
		var seq uint64
		if rt, ok := msg.(*protocol.Return); ok {
			body, seq = rt.Body, rt.Seq
		} else {
			ev := msg.(*protocol.Event)
			body, seq = ev.Body, ev.Seq
			var eb protocol.EventBody
			if err := protocol.Unmarshal(body, &eb); err == nil && event.ReservedForMaster(eb.Tag) {
				return drop(protocol.KindForbidden, "event tag "+eb.Tag+" is reserved for the master")
			}
		}
		if !protocol.MadeBy(body, d.id) {
			return drop(protocol.KindWrongID, msg.Type().String()+" made under another id than "+d.id)
		}
		if !r.throttle(d) {
			return false
		}
		if r.tamper != nil {
			wire = r.tamper(msg.Type(), wire)
		}
		r.forwardUp(d, seq, wire)
	case *protocol.Grains:
		d.mu.Lock()
		d.hello.Grains = msg.Grains
		up := d.up
		d.mu.Unlock()
		if up != nil {
			up.send(wire)
		}
	case *protocol.MineGet, *protocol.StateGet, *protocol.PillarGet, *protocol.FileQuery:
		// Requests the master answers for the device's own session
		// (it knows the asker from the stream): they go up as they
		// are, and the answer comes down (link.go). Without an
		// upstream now, the device is told so at once. They share
		// the device's event rate.
		if !r.throttle(d) {
			return false
		}
		d.mu.Lock()
		up := d.up
		d.mu.Unlock()
		if up != nil {
			up.send(wire)
		} else {
			r.noUpstream(d, msg)
		}
	case *protocol.BlobGet:
		r.serveBlob(d, msg) // chunks.go
	case *protocol.Ping:
		if pb, err := protocol.Encode(&protocol.Pong{Seq: msg.Seq}); err == nil {
			d.down.send(protocol.AppendFrame(nil, pb))
		}
	case *protocol.Pong:
	case *protocol.Error:
		return false
	default:
		return drop(protocol.KindForbidden, "a device may not send "+msg.Type().String())
	}
	return true
}

// forwardUp keeps a return or event until the master acknowledges it and
// sends it now if the device's upstream stream is there: in the link's
// next batch, or on that stream when the master takes no batches.
func (r *Relay) forwardUp(d *device, seq uint64, wire []byte) {
	if seq != 0 {
		r.spoolDropped(r.store.put(d, seq, wire))
	}
	d.mu.Lock()
	up, us, b := d.up, d.upStream, d.batch
	d.mu.Unlock()
	switch {
	case b != nil:
		b.add(d.id, us.StreamID(), wire[4:])
	case up != nil:
		up.send(wire)
	}
}

// spoolDropped disconnects the devices whose items the store dropped (for
// room, or unwritable), so that they send them again from their own
// spools. The caller holds neither the store's lock nor a device's.
func (r *Relay) spoolDropped(lost []*device) {
	for _, od := range lost {
		if od.proxy {
			od.logger().Error("the relay's spool dropped some of this proxy minion's returns (spool_max, or a failed write): they are lost")
			continue
		}
		od.logger().Warn("the relay dropped some of this device's returns or events (spool_max, or a failed write): it must send them again")
		if !od.attached() {
			continue // told when its session resumes (attach)
		}
		od.close(protocol.KindRateLimited, "the relay dropped some of this device's returns or events; send them again")
	}
}

// throttle waits for the device's next token (relay: event_rate and
// event_burst): a device over its rate is not read meanwhile, so QUIC's
// flow control holds it back and its agent keeps the rest in its spool.
// Nothing is lost and nobody else waits. It reports false if the device
// went away meanwhile.
func (r *Relay) throttle(d *device) bool {
	w := d.limit.wait(time.Now())
	if w == 0 {
		return true
	}
	r.throttled.Add(1)
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.conn.Context().Done():
		return false
	}
}

// linkWait is how long a device's Hello waits for the upstream link (a
// relay just started, or reconnecting) before it is refused.
const linkWait = 5 * time.Second

// waitLink returns the upstream link, waiting up to linkWait for it.
func (r *Relay) waitLink(ctx context.Context, conn *quic.Conn) *link {
	deadline := time.Now().Add(linkWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if l := r.link.Load(); l != nil || time.Now().After(deadline) {
			return l
		}
		select {
		case <-ctx.Done():
			return nil
		case <-conn.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// noUpstream answers a device's request that cannot go up now.
func (r *Relay) noUpstream(d *device, msg protocol.Message) {
	const why = "the relay cannot reach the master now"
	var ans protocol.Message
	switch m := msg.(type) {
	case *protocol.MineGet:
		ans = &protocol.MineData{Req: m.Req, Err: why}
	case *protocol.StateGet:
		ans = &protocol.StateJob{Req: m.Req, Err: why}
	case *protocol.PillarGet:
		ans = &protocol.PillarData{Req: m.Req, Err: why}
	case *protocol.FileQuery:
		ans = &protocol.FileAnswer{Req: m.Req, Err: why}
	default:
		return
	}
	if b, err := protocol.Encode(ans); err == nil {
		d.down.send(protocol.AppendFrame(nil, b))
	}
}
