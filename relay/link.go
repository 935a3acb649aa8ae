package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

const handshakeTimeout = 10 * time.Second

// reattachWorkers is how many devices' sessions are resumed at once after
// the upstream link comes back (the admit rate bounds them too).
const reattachWorkers = 32

// link is one upstream connection to the master: its control stream, and a
// stream per device opened on it.
type link struct {
	conn      *quic.Conn
	ctrl      *protocol.Framer
	masterPub ed25519.PublicKey
	// batch sends the devices' returns and events on the control stream;
	// nil when the master is older than protocol.CapBatch: they go on
	// each device's stream.
	batch *batcher
}

// linkLoop keeps the upstream link, reconnecting with jittered
// exponential backoff, trying the masters of the list in turn.
func (r *Relay) linkLoop(ctx context.Context) error {
	addrs := r.o.Config.MasterAddrs()
	backoff := time.Second
	const maxBackoff = 30 * time.Second
	for i := 0; ; i++ {
		addr := addrs[i%len(addrs)]
		ups := r.linkUps.Load()
		err := r.runLink(ctx, addr)
		if ctx.Err() != nil {
			return nil
		}
		if r.linkUps.Load() != ups {
			// The link was up: the master went away (a restart, a
			// failover). Come back as soon as it is there again, as an
			// agent does after an established session; only failures
			// in a row back off further.
			backoff = time.Second
		}
		if protocol.KindOf(err) == protocol.KindForbidden {
			r.log.Error("the master refuses this agent as a relay: list its id in the master's relay_allow",
				zap.String("master", addr), zap.Error(err), zap.Duration("retry_in_max", backoff))
		} else {
			r.log.Info("upstream link ended", zap.String("master", addr), zap.Error(err), zap.Duration("retry_in_max", backoff))
		}
		wait := time.Duration(rand.Int64N(int64(backoff)) + int64(100*time.Millisecond))
		backoff = min(backoff*2, maxBackoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// upstreamQUICConfig is the QUIC configuration of the link to the master.
// With master_alive_interval set, as on an agent (agent/session.go), a
// silent master (a WAN that drops) ends the link after twice that, not
// QUIC's default idle timeout: the relay reconnects, and the devices'
// chunk fetches, asked again, resume from its cache.
func (r *Relay) upstreamQUICConfig() *quic.Config {
	qc := protocol.QUICConfig()
	if d := 2 * time.Duration(r.o.Config.MasterAliveInterval) * time.Second; d > 0 && d < qc.MaxIdleTimeout {
		qc.MaxIdleTimeout = d
		qc.KeepAlivePeriod = d / 2
	}
	return qc
}

// runLink runs one upstream connection until it ends.
func (r *Relay) runLink(ctx context.Context, addr string) error {
	dctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	conn, err := quic.DialAddr(dctx, addr, r.o.Identity.ClientTLS(r.pinMaster), r.upstreamQUICConfig())
	cancel()
	if err != nil {
		return fmt.Errorf("dial master %s: %w", addr, err)
	}
	defer conn.CloseWithError(0, "")
	// Cancelling ctx unblocks the reads below.
	unblock := context.AfterFunc(ctx, func() { conn.CloseWithError(0, "") })
	defer unblock()
	masterPub, err := protocol.PeerKey(conn.ConnectionState().TLS)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	stream, err := conn.OpenStreamSync(sctx)
	cancel()
	if err != nil {
		return fmt.Errorf("open link stream: %w", err)
	}
	f := protocol.NewFramer(r.tap(stream), protocol.DefaultMaxFrame)
	kx, err := protocol.NewKX()
	if err != nil {
		return err
	}
	id := r.o.Config.ID
	if err := f.Write(&protocol.Hello{ID: id, Version: r.o.Version, Caps: protocol.CapabilityVersion, Relay: true,
		KX: kx.Public(), KXSig: protocol.SignAgentKX(r.o.Identity, id, kx.Public())}); err != nil {
		return fmt.Errorf("send link hello: %w", err)
	}
	stream.SetReadDeadline(time.Now().Add(handshakeTimeout))
	msg, err := f.Read()
	stream.SetReadDeadline(time.Time{})
	if err != nil {
		var ae *quic.ApplicationError
		if errors.As(err, &ae) && ae.Remote {
			// The master closed the connection, its Error frame lost
			// to the close: the close carries its kind.
			return fmt.Errorf("master refused the link: %w", &protocol.ProtoError{Kind: protocol.Kind(ae.ErrorCode), Msg: ae.ErrorMessage})
		}
		return fmt.Errorf("read link key status: %w", err)
	}
	var caps uint32
	switch msg := msg.(type) {
	case *protocol.KeyStatus:
		caps = msg.Caps
		if r.maxCaps != 0 {
			caps = min(caps, r.maxCaps)
		}
		if msg.Status != protocol.KeyAccepted {
			return fmt.Errorf("the master has not accepted the relay's key (%s): accept %s with halite-key first", msg.Status, id)
		}
		if caps < protocol.CapRelay {
			return fmt.Errorf("the master (capability %d) does not serve relays (capability %d)", caps, protocol.CapRelay)
		}
	case *protocol.Error:
		return fmt.Errorf("master refused the link: %w", msg.Err())
	default:
		return fmt.Errorf("master sent %s before the key status", msg.Type())
	}
	l := &link{conn: conn, ctrl: f, masterPub: masterPub}
	var wg sync.WaitGroup
	if caps >= protocol.CapBatch {
		// Held items may wait for room up to the spool's size (they are
		// the store's bytes, not copies).
		l.batch = newBatcher(conn, f, stream, r.conf.BatchMax, time.Duration(r.conf.BatchDelay)*time.Millisecond, r.conf.SpoolMax, &r.batches)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.batch.run()
		}()
	}
	r.link.Store(l)
	r.linkUps.Add(1)
	select {
	case r.linkChanged <- struct{}{}:
	default:
	}
	defer r.link.CompareAndSwap(l, nil)
	r.log.Info("upstream link up", zap.String("master", addr), zap.Bool("batches", l.batch != nil))
	if _, _, dropped := r.store.stats(); dropped > r.reported {
		r.event("halite/relay/"+id+"/spool/dropped", map[string]any{"dropped": dropped - r.reported, "total": dropped})
		r.reported = dropped
	}

	wg.Add(2)
	go func() {
		defer wg.Done()
		r.reattachAll(ctx, l)
	}()
	go func() {
		defer wg.Done()
		r.resumeOrphans(ctx, l)
	}()
	err = r.readCtrl(ctx, l)
	conn.CloseWithError(0, "")
	if l.batch != nil {
		l.batch.stop()
		if berr := l.batch.failed(); berr != nil && ctx.Err() == nil {
			err = berr // the cause; reading the link failed of it
		}
	}
	wg.Wait()
	return err
}

// readCtrl handles the link's control stream: jobs to fan out, pings.
func (r *Relay) readCtrl(ctx context.Context, l *link) error {
	for {
		b, err := l.ctrl.ReadFrame()
		var msg protocol.Message
		if err == nil {
			msg, err = protocol.DecodeLink(b)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read link: %w", err)
		}
		switch msg := msg.(type) {
		case *protocol.Job:
			r.fanOut(l, msg)
		case *protocol.ProxyCtl:
			r.proxyCtl(l, msg)
		case *protocol.Ping:
			if err := l.ctrl.Write(&protocol.Pong{Seq: msg.Seq}); err != nil {
				return fmt.Errorf("send pong: %w", err)
			}
		case *protocol.Pong:
		case *protocol.Error:
			return fmt.Errorf("master closed the link: %w", msg.Err())
		default:
			r.log.Warn("unexpected message on the upstream link", zap.Stringer("type", msg.Type()))
		}
	}
}

// fanOut sends a job to the devices it is for: those its IDs name,
// else those its target matches. Devices verify the master's signature
// themselves; the relay checks it too, so that a forged job costs it
// nothing.
func (r *Relay) fanOut(l *link, rj *protocol.Job) {
	job := &protocol.Job{Signed: rj.Signed} // forwarded without IDs
	body, err := job.Open(l.masterPub)
	if err != nil {
		r.log.Warn("relay job refused", zap.Error(err))
		return
	}
	enc, err := protocol.Encode(job)
	if err != nil {
		r.log.Warn("relay job", zap.Error(err))
		return
	}
	wire := protocol.AppendFrame(nil, enc)
	if r.tamper != nil {
		wire = r.tamper(protocol.TypeJob, wire)
	}
	var match *targets.Matcher
	var names map[string]bool
	if len(rj.IDs) > 0 {
		names = make(map[string]bool, len(rj.IDs))
		for _, id := range rj.IDs {
			names[id] = true
		}
	} else if match, err = targets.Compile(body.Tgt, body.TgtType, targets.Options{Delimiter: body.Delimiter}); err != nil {
		// Every device checks the target again: send to all.
		r.log.Warn("relay job target not checkable here; sent to every device", zap.String("jid", body.JID), zap.Error(err))
	}
	sent := 0
	mn := targets.Minion{}
	j := recentJob{at: time.Now(), wire: wire, body: body, names: names, match: match}
	for _, d := range r.fanOutTo(j) {
		if !d.accepted.Load() || !j.wants(d, &mn) {
			continue
		}
		if d.sendWithAck(wire) {
			sent++
		}
	}
	if r.proxyCount() > 0 {
		sent += r.fanOutProxies(body, func(id string, grains map[string]any) bool {
			return j.wantsMinion(id, grains, &targets.Minion{})
		})
	}
	if ce := r.log.Check(zap.DebugLevel, "fanned out job"); ce != nil {
		ce.Write(zap.String("jid", body.JID), zap.Int("devices", sent))
	}
}

// openUp opens a device's stream on the link, sends its Hello and reads the
// master's answer. It waits for the admit rate first.
func (r *Relay) openUp(ctx context.Context, l *link, d *device) (*quic.Stream, *protocol.Framer, protocol.Message, error) {
	if err := r.admitUp(ctx, l, d); err != nil {
		return nil, nil, nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	s, err := l.conn.OpenStreamSync(sctx)
	cancel()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open device stream: %w", err)
	}
	f := protocol.NewStreamFramer(r.tap(s), protocol.DefaultMaxFrame)
	hb, late, err := d.upHello()
	if err == nil {
		s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		err = f.WriteFrame(hb)
		s.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		s.CancelRead(0)
		s.CancelWrite(0)
		return nil, nil, nil, fmt.Errorf("forward hello: %w", err)
	}
	s.SetReadDeadline(time.Now().Add(handshakeTimeout))
	msg, err := f.Read()
	s.SetReadDeadline(time.Time{})
	if err != nil {
		s.CancelRead(0)
		s.CancelWrite(0)
		return nil, nil, nil, fmt.Errorf("read key status: %w", err)
	}
	if st, ok := msg.(*protocol.KeyStatus); ok && st.Status == protocol.KeyAccepted && late != nil {
		// Grains too large for a Hello, before anything else.
		s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		err = f.WriteFrame(late)
		s.SetWriteDeadline(time.Time{})
		if err != nil {
			s.CancelRead(0)
			s.CancelWrite(0)
			return nil, nil, nil, fmt.Errorf("forward grains: %w", err)
		}
	}
	return s, f, msg, nil
}

// admitUp keeps device sessions opened upstream to the relay's admit rate:
// it takes one token of r.admit, possibly one still to come, and waits
// until it is there. A device whose connection ends meanwhile (it gave up
// and will dial again), or a link that goes, gives its token back and
// ends the wait, and with it the slot its handshake holds against
// max_devices. (Before, the wait took a token again each time it woke,
// so once a storm had used the burst no waiter got through again — each
// woke to a bucket its own earlier token had emptied — and the waiters
// of devices long gone kept their slots: "relay full (max_devices)".)
func (r *Relay) admitUp(ctx context.Context, l *link, d *device) error {
	var gone <-chan struct{} // an orphan of the previous run has no connection
	if d.conn != nil {
		gone = d.conn.Context().Done()
	}
	return admitWait(ctx, r.admit, l.conn.Context().Done(), gone)
}

// admitWait takes one token of b and waits until it is there, unless ctx,
// the link (linkDone) or the device (gone) ends first: then the token goes
// back.
func admitWait(ctx context.Context, b *bucket, linkDone, gone <-chan struct{}) error {
	w := b.wait(time.Now())
	if w == 0 {
		return nil
	}
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		b.giveBack()
		return ctx.Err()
	case <-linkDone:
		b.giveBack()
		return errors.New("the link to the master went while waiting for admission")
	case <-gone:
		b.giveBack()
		return errors.New("the device left while waiting for admission")
	}
}

// pendingWait bounds how long the relay waits for the master's second
// status of a pending device (awaitDecision); the master lets go first.
const pendingWait = 2 * time.Minute

// awaitDecision reads the master's second status of device d, pending on
// stream s, until it comes, the device's connection ends, or pendingWait
// passes. Accepted, the device's grains too large for its Hello follow.
func (r *Relay) awaitDecision(ctx context.Context, conn *quic.Conn, d *device, s *quic.Stream, f *protocol.Framer) (protocol.Message, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(wctx, func() { s.CancelRead(0) })
	defer stop()
	gone := context.AfterFunc(conn.Context(), cancel)
	defer gone()
	s.SetReadDeadline(time.Now().Add(pendingWait))
	msg, err := f.Read()
	s.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("read key status: %w", err)
	}
	if st, ok := msg.(*protocol.KeyStatus); ok && st.Status == protocol.KeyAccepted {
		_, late, err := d.upHello()
		if err == nil && late != nil {
			s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
			err = f.WriteFrame(late)
			s.SetWriteDeadline(time.Time{})
		}
		if err != nil {
			return nil, fmt.Errorf("forward grains: %w", err)
		}
	}
	return msg, nil
}

// reattachAll resumes, on a new link, the sessions of the devices that
// stayed connected while it was down.
func (r *Relay) reattachAll(ctx context.Context, l *link) {
	r.onLink(ctx, l, func(d *device) bool { return d.accepted.Load() && !d.attached() }, r.snapshot(), r.reattach)
}

// onLink runs do, reattachWorkers at a time, for each device of all that
// want picks, until the list ends, ctx ends or link l goes.
func (r *Relay) onLink(ctx context.Context, l *link, want func(*device) bool, all []*device, do func(context.Context, *link, *device)) {
	todo := make(chan *device)
	var wg sync.WaitGroup
	for range reattachWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range todo {
				do(ctx, l, d)
			}
		}()
	}
	defer wg.Wait()
	defer close(todo)
	for _, d := range all {
		if !want(d) {
			continue
		}
		select {
		case todo <- d:
		case <-ctx.Done():
			return
		case <-l.conn.Context().Done():
			return
		}
	}
}

// reattach resumes one device's session on link l: the same Hello gets the
// same key agreement (protocol.Identity.SessionKX), so what the device
// sent meanwhile still verifies; it is sent again, in order.
func (r *Relay) reattach(ctx context.Context, l *link, d *device) {
	s, f, msg, err := r.openUp(ctx, l, d)
	if err != nil {
		d.logger().Debug("resume device session", zap.Error(err))
		return
	}
	st, ok := msg.(*protocol.KeyStatus)
	if !ok || st.Status != protocol.KeyAccepted {
		why := "the master ended the session"
		if ok {
			why = "key " + st.Status + " by the master"
		} else if e, isErr := msg.(*protocol.Error); isErr {
			why = e.Msg
		}
		s.CancelRead(0)
		s.Close()
		d.close(protocol.KindNotAccepted, why)
		return
	}
	r.attach(ctx, l, d, s, f)
}

// attach makes s (its Hello answered, accepted) the device's upstream
// stream: sends what the device sent meanwhile and starts reading. It
// queues the items under d.mu, where forwardUp looks for the stream, so
// that they go before anything the device sends next.
func (r *Relay) attach(ctx context.Context, l *link, d *device, s *quic.Stream, f *protocol.Framer) {
	up := newSender(s, &r.wg, nil)
	up.onFail = func() { d.detach(up) }
	d.mu.Lock()
	wires, lost := r.store.pending(d)
	if lost {
		d.mu.Unlock()
		s.CancelRead(0)
		s.Close()
		d.close(protocol.KindRateLimited, "the relay dropped some of this device's returns or events; send them again")
		return
	}
	for _, w := range wires {
		if l.batch != nil {
			l.batch.add(d.id, s.StreamID(), w[4:])
		} else {
			up.send(w)
		}
	}
	d.up, d.upStream, d.batch = up, s, l.batch
	if d.upReady != nil {
		close(d.upReady)
		d.upReady = nil
	}
	d.mu.Unlock()
	// Read with no goroutine while the master sends nothing for the
	// device (protocol.Pump): nearly all the time.
	r.wg.Add(1)
	protocol.StartPump(s, f, func(b []byte) bool { return r.upFrame(d, up, b) }, func(err error) {
		defer r.wg.Done()
		if err == nil {
			return
		}
		d.detach(up)
		var se *quic.StreamError
		if ctx.Err() == nil && l.conn.Context().Err() == nil && (errors.Is(err, io.EOF) || errors.As(err, &se)) {
			// The master ended this device's session, not the link.
			d.close(protocol.KindOther, "the master ended the session")
		}
	})
}

// upFrame forwards one frame the master sent on a device's stream (the
// stream's pump calls it for each, in order). It reports false when the
// master ended the device's session.
func (r *Relay) upFrame(d *device, up *sender, b []byte) bool {
	msg, err := protocol.Decode(b)
	if err != nil {
		d.logger().Warn("master sent a frame that does not decode", zap.Error(err))
		return true
	}
	switch msg := msg.(type) {
	case *protocol.Job:
		wire := protocol.AppendFrame(nil, b)
		if r.tamper != nil {
			wire = r.tamper(protocol.TypeJob, wire)
		}
		d.sendWithAck(wire)
	case *protocol.Ack:
		r.store.ack(d, msg.Seq)
		d.noteAck(msg.Seq, time.Now())
	case *protocol.BlobData:
		r.blobAnswer(msg) // the relay's own fetch (chunks.go)
	case *protocol.MineData, *protocol.StateJob, *protocol.PillarData:
		// Answers to the device's own requests; a StateJob's job is
		// signed by the master, and the device checks it.
		d.down.send(protocol.AppendFrame(nil, b))
	case *protocol.FileAnswer:
		// Signed by the master over the device's question; the
		// device checks it (and each chunk it then fetches).
		wire := protocol.AppendFrame(nil, b)
		if r.tamper != nil {
			wire = r.tamper(protocol.TypeFileAnswer, wire)
		}
		d.down.send(wire)
	case *protocol.Ping:
		if pb, err := protocol.Encode(&protocol.Pong{Seq: msg.Seq}); err == nil {
			up.send(protocol.AppendFrame(nil, pb))
		}
	case *protocol.Pong:
	case *protocol.Error:
		d.down.send(protocol.AppendFrame(nil, b))
		d.close(msg.Kind, msg.Msg)
		return false
	default:
		d.logger().Warn("unexpected message from the master for a device", zap.Stringer("type", msg.Type()))
	}
	return true
}

// ackDelay is how long the master's ack of a device's returns and events
// may wait at the relay for a job to that device to ride with, before it
// goes down alone. A packet to a device costs the relay and the device
// more than the bytes it carries (a send, a receive and QUIC's own ack of
// it, each way); a device that gets jobs often has its acks with them, and
// one that does not waits ackDelay longer to forget what it sent (it keeps
// it in its spool meanwhile: nothing is lost). A variable for the tests.
var ackDelay = 2 * time.Second

// ackLoop forwards the acks that waited ackDelay, until ctx ends.
func (r *Relay) ackLoop(ctx context.Context) error {
	delay := ackDelay
	t := time.NewTicker(delay / 8)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			old := now.Add(-delay).UnixNano()
			for _, d := range r.snapshot() {
				if since := d.ackSince.Load(); since != 0 && since <= old {
					d.sendWithAck(nil)
				}
			}
		}
	}
}

func readPub(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return protocol.ParsePublicKey(b)
}
