package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// tryTimeout is the time a try to reach a master has for its handshake.
func (a *Agent) tryTimeout() time.Duration {
	return protocol.HandshakeTryTimeout(a.authTimeout())
}

// authTimeout is Salt's auth_timeout, the time one try may go unanswered:
// QUIC's handshake idle timeout. Unset (0), it is Salt's 5 s
// (salt/config/__init__.py) when a try given up sends the agent to another
// master (failover), and protocol.PatientHandshakeIdleTimeout otherwise:
// with one master or relay, or all at once (hot), the next try goes to the
// same address, and a try given up early only costs a new key exchange in a
// relay's reconnect storm (docs/BENCHMARKS.md).
func (a *Agent) authTimeout() time.Duration {
	switch {
	case a.cfg.AuthTimeout > 0:
		return time.Duration(a.cfg.AuthTimeout) * time.Second
	case a.cfg.MasterType == "failover" && len(a.cfg.Master) > 1:
		return 5 * time.Second
	}
	return protocol.PatientHandshakeIdleTimeout
}

// masterConn is a connection to a master whose handshake is done: the
// master accepted this agent's key.
type masterConn struct {
	l      *link
	conn   *quic.Conn
	f      *protocol.Framer
	macKey []byte
	acks   bool // the master acknowledges returns and events

	next *masterConn // failover: the session that replaced this one (failback)
}

// quicConfig is the QUIC configuration of a connection to a master. With
// master_alive_interval set, aliveLoop notices a silent master (dead,
// paused, cut off) after that long; QUIC's idle timeout, at twice that,
// is only the backstop.
func (a *Agent) quicConfig() *quic.Config {
	qc := protocol.AgentQUICConfig()
	qc.HandshakeIdleTimeout = a.authTimeout()
	if d := 2 * a.aliveInterval(); d > 0 && d < qc.MaxIdleTimeout {
		qc.MaxIdleTimeout = d
		qc.KeepAlivePeriod = d / 2
	}
	return qc
}

// dial connects to the master of l and runs the handshake up to the
// master's acceptance of this agent's key. hold, if not 0, is how long to
// wait on the connection for the master to decide a pending key (a master
// of capability protocol.CapKeyNotify sends a second KeyStatus then); the
// errNotAccepted of a held wait says how much of it is left.
func (a *Agent) dial(ctx context.Context, l *link, hold time.Duration) (*masterConn, error) {
	addr, err := resolve(ctx, l.addr)
	if err != nil {
		return nil, err
	}
	var pinErr *pinError
	pin := func(pub ed25519.PublicKey) error {
		err := a.checkPeer(pub)
		if pe, ok := err.(*pinError); ok {
			pinErr = pe
		}
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, a.tryTimeout())
	tc := a.id.ClientTLS(pin)
	tc.ClientSessionCache = &l.tickets
	conn, err := quic.DialAddr(dctx, addr, tc, a.quicConfig())
	cancel()
	if err != nil {
		if pinErr != nil {
			return nil, pinErr
		}
		return nil, fmt.Errorf("dial master %s: %w", l.addr, err)
	}
	ok := false
	defer func() {
		if !ok {
			conn.CloseWithError(0, "")
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, a.tryTimeout())
	stream, err := conn.OpenStreamSync(sctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("open stream to %s: %w", l.addr, err)
	}
	f := protocol.NewFramer(stream, protocol.DefaultMaxFrame)
	kx, err := protocol.NewKX()
	if err != nil {
		return nil, err
	}
	hello := &protocol.Hello{ID: a.cfg.ID, Version: Version, Caps: protocol.CapabilityVersion, Grains: a.grains.Get(),
		KX: kx.Public(), KXSig: protocol.SignAgentKX(a.id, a.cfg.ID, kx.Public()), Returners: a.cfg.Return}
	// Grains too large for a Hello follow once the key is accepted.
	hb, lateGrains, err := protocol.EncodeHello(hello)
	if err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	if err := f.WriteFrame(hb); err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	stream.SetReadDeadline(time.Now().Add(a.tryTimeout()))
	msg, err := f.Read()
	stream.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("read key status from %s: %w", l.addr, err)
	}
	if st, isStatus := msg.(*protocol.KeyStatus); isStatus && st.Status == protocol.KeyPending && hold > 0 && st.Caps >= protocol.CapKeyNotify {
		if err := a.pinAfterStatus(conn, st); err != nil {
			return nil, err
		}
		if msg, err = a.awaitDecision(ctx, conn, stream, f, l, hold); err != nil {
			return nil, err
		}
	}
	c := &masterConn{l: l, conn: conn, f: f}
	switch msg := msg.(type) {
	case *protocol.KeyStatus:
		if err := a.pinAfterStatus(conn, msg); err != nil {
			return nil, err
		}
		if msg.Status != protocol.KeyAccepted {
			return nil, &errNotAccepted{status: msg.Status}
		}
		c.acks = msg.Caps >= protocol.CapAck
		a.mine.setCaps(l.out, int(msg.Caps))
		if msg.KX != nil {
			// The master's half must be signed by the pinned master key.
			if err := protocol.VerifyMasterKX(*a.masterPub.Load(), a.cfg.ID, hello.KX, msg.KX, msg.KXSig); err != nil {
				return nil, fmt.Errorf("master key agreement: %w", err)
			}
			if c.macKey, err = kx.MACKey(msg.KX, a.cfg.ID, hello.KX, msg.KX); err != nil {
				return nil, fmt.Errorf("master key agreement: %w", err)
			}
		}
	case *protocol.Error:
		return nil, fmt.Errorf("master refused: %w", msg.Err())
	default:
		return nil, fmt.Errorf("master sent %s before the key status", msg.Type())
	}
	if lateGrains != nil {
		if err := f.WriteFrame(lateGrains); err != nil {
			return nil, fmt.Errorf("send grains: %w", err)
		}
	}
	ok = true
	return c, nil
}

// awaitDecision waits on the connection, up to hold, for the master's
// second KeyStatus after a pending one: the master sends it as soon as the
// key is accepted or rejected. A wait that ends without one is an
// errNotAccepted whose rest is the part of hold not spent (the master let
// go early: its hold is shorter, or full, or the key was deleted).
func (a *Agent) awaitDecision(ctx context.Context, conn *quic.Conn, stream *quic.Stream, f *protocol.Framer, l *link, hold time.Duration) (protocol.Message, error) {
	until := time.Now().Add(hold)
	a.log.Info("key pending; waiting on the connection for the master to decide", zap.String("master", l.addr),
		zap.Duration("for", hold), zap.String("finger", a.Fingerprint()))
	stop := context.AfterFunc(ctx, func() { conn.CloseWithError(0, "") })
	defer stop()
	stream.SetReadDeadline(until)
	msg, err := f.Read()
	stream.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, &errNotAccepted{status: protocol.KeyPending, held: true, rest: max(time.Until(until), 0)}
	}
	return msg, nil
}

// errNotAlive ends a session whose master sent no packet for
// master_alive_interval.
var errNotAlive = errors.New("master silent for master_alive_interval")

// serve runs an accepted connection until it ends or ctx does. watch, if
// not nil, runs beside it: a connection it returns replaces this one
// (c.next), which then ends.
func (a *Agent) serve(ctx context.Context, c *masterConn, watch func(context.Context) *masterConn) error {
	l, conn, f := c.l, c.conn, c.f
	defer conn.CloseWithError(0, "")
	a.log.Info("connected to master", zap.String("master", l.addr))
	a.trialAccepted(l.addr) // firmware.go: a build on trial commits
	a.nconn.Add(1)
	a.bus.Publish("__master_connected", map[string]any{"master": l.addr})
	defer func() {
		a.nconn.Add(-1)
		a.bus.Publish("__master_disconnected", map[string]any{"master": l.addr})
	}()

	sessCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Cancelling the session unblocks the reader.
	unblock := context.AfterFunc(sessCtx, func() { conn.CloseWithError(0, "") })
	defer unblock()
	var sent atomic.Uint64 // the highest spooled seq written on this connection
	var heard atomic.Int64 // when the master last sent anything
	heard.Store(time.Now().UnixNano())
	writeErr := make(chan error, 1)
	go func() { writeErr <- a.writeLoop(sessCtx, l.out, f, c.macKey, c.acks, &sent) }()
	aliveErr := make(chan error, 1)
	go func() {
		err := a.aliveLoop(sessCtx, conn, l.out, &heard)
		if err != nil {
			stop()
		}
		aliveErr <- err
	}()
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		if watch == nil {
			return
		}
		if next := watch(sessCtx); next != nil {
			c.next = next
			stop()
		}
	}()
	pillarDone := make(chan struct{})
	go func() {
		defer close(pillarDone)
		a.pillarAtStart(sessCtx, l)
	}()
	// Jobs run under ctx, not sessCtx: a job outlives the connection that
	// brought it, and its return waits in the outbox for the next one.
	readErr := a.readLoop(ctx, sessCtx, l, f, &sent, &heard)
	stop()
	a.blobsLost(l)
	<-pillarDone
	conn.CloseWithError(0, "")
	werr := <-writeErr
	aerr := <-aliveErr
	<-watchDone
	switch {
	case c.next != nil:
		return nil
	case aerr != nil:
		return aerr
	case readErr != nil:
		return readErr
	}
	return werr
}

// aliveLoop checks the master every master_alive_interval/10 (100 ms to
// 1 s). It sends a Ping every third of the interval; the master's QUIC
// stack acknowledges it even while the master is busy. The session ends
// when no packet at all came from the master for the whole interval (it
// is dead, paused or cut off), or when its process acknowledged packets
// but sent no message for 3 intervals, at least 15 s (it is stuck: a master
// that is merely busy, a fleet arriving, is better waited for than deserted
// for another that the whole fleet would then crowd). heard is when
// the last message arrived (UnixNano), kept by the read loop.
func (a *Agent) aliveLoop(ctx context.Context, conn *quic.Conn, out *outbox, heard *atomic.Int64) error {
	every := a.aliveInterval()
	if every <= 0 {
		return nil
	}
	tick := min(max(every/10, 100*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var seq, packets uint64
	lastPing, lastPacket := time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			if n := conn.ConnectionStats().PacketsReceived; n != packets {
				packets, lastPacket = n, now
			}
			if now.Sub(lastPacket) > every {
				return errNotAlive
			}
			if now.Sub(time.Unix(0, heard.Load())) > max(3*every, 15*time.Second) {
				return errStuck
			}
			if now.Sub(lastPing) >= every/3 {
				seq++
				out.push(&protocol.Ping{Seq: seq})
				lastPing = now
			}
		}
	}
}

// errStuck ends a session whose master acknowledges packets but answers
// nothing.
var errStuck = errors.New("master stuck: it acknowledges packets but answers nothing")

// writeLoop sends the outbox to the master: the in-memory messages first,
// then the spooled returns and events not yet written on this connection,
// oldest first. A spooled item stays until the master acknowledges it
// (see readLoop), so that the next session sends it again if this one
// ends first; when the master sends no acks (acks false: it predates
// them), an item goes once written. Returns and events are authenticated
// here, with the session's MAC key (or the agent's signature when the
// master agreed none), so that what waited across sessions is tagged for
// the session that carries it. sent is the highest seq written.
func (a *Agent) writeLoop(ctx context.Context, out *outbox, f *protocol.Framer, macKey []byte, acks bool, sent *atomic.Uint64) error {
	for {
		if m, ok := out.peek(); ok {
			if err := f.Write(m); err != nil {
				return fmt.Errorf("send %s: %w", m.Type(), err)
			}
			if ce := a.log.Check(zap.DebugLevel, "sent"); ce != nil {
				ce.Write(zap.Stringer("msg", m.Type()))
			}
			out.pop(m)
			continue
		}
		it, ok := out.spool.after(sent.Load())
		if !ok {
			select {
			case <-ctx.Done():
				return nil
			case <-out.notify:
				continue
			}
		}
		seq := it.seq
		if !acks {
			seq = 0
		}
		wire, err := a.seal(it, seq, macKey)
		if err != nil {
			a.log.Error("cannot encode a message for the master; dropped", zap.Stringer("type", it.kind),
				zap.Uint64("seq", it.seq), zap.Error(err))
			sent.Store(it.seq)
			a.ackSpool(out, it.seq)
			continue
		}
		if err := f.Write(wire); err != nil {
			return fmt.Errorf("send %s: %w", it.kind, err)
		}
		if ce := a.log.Check(zap.DebugLevel, "sent"); ce != nil {
			ce.Write(zap.Stringer("msg", it.kind), zap.Uint64("seq", it.seq))
		}
		sent.Store(it.seq)
		if !acks {
			a.ackSpool(out, it.seq)
		}
	}
}

// ackSpool forgets the spooled items of out up to seq.
func (a *Agent) ackSpool(out *outbox, seq uint64) {
	if err := out.spool.ack(seq); err != nil {
		a.log.Warn("outbox ack", zap.Error(err))
	}
}

// readLoop handles what the master sends. sent is the highest seq the
// session's writer has written: an ack never covers more (a relay could
// forge one).
func (a *Agent) readLoop(ctx, sessCtx context.Context, l *link, f *protocol.Framer, sent *atomic.Uint64, heard *atomic.Int64) error {
	for {
		msg, err := f.Read()
		if err == nil {
			heard.Store(time.Now().UnixNano())
		}
		if err != nil {
			if sessCtx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read from master: %w", err)
		}
		if ce := a.log.Check(zap.DebugLevel, "recv"); ce != nil {
			ce.Write(zap.Stringer("msg", msg.Type()))
		}
		switch msg := msg.(type) {
		case *protocol.Job:
			a.handleJobFrom(ctx, msg, l.addr, l.out)
		case *protocol.Ping:
			l.out.push(&protocol.Pong{Seq: msg.Seq})
		case *protocol.Pong:
		case *protocol.MineData:
			a.mineReply(msg)
		case *protocol.StateJob:
			a.stateReply(msg)
		case *protocol.BlobData:
			a.blobReply(msg)
		case *protocol.PillarData:
			a.pillarReply(msg)
		case *protocol.FileAnswer:
			a.fileReply(msg)
		case *protocol.Ack:
			a.ackSpool(l.out, min(msg.Seq, sent.Load()))
		case *protocol.Error:
			return fmt.Errorf("master closed the connection: %w", msg.Err())
		default:
			a.log.Warn("unexpected message from master", zap.Stringer("type", msg.Type()))
		}
	}
}

// handleJob verifies a job, checks that it is for this agent and runs it,
// its return going to the first master's outbox.
func (a *Agent) handleJob(ctx context.Context, j *protocol.Job) { a.handleJobFrom(ctx, j, "", a.out) }

// handleJobFrom is handleJob for a job that came from the master at link
// (its address) whose outbox is out: the return goes there.
func (a *Agent) handleJobFrom(ctx context.Context, j *protocol.Job, link string, out *outbox) {
	pub := a.masterPub.Load()
	if pub == nil {
		a.log.Warn("job before the master key was pinned; dropped")
		return
	}
	body, err := j.Open(*pub)
	if err != nil {
		a.log.Warn("refusing job", zap.Error(err))
		return
	}
	if !a.forMe(body) {
		a.log.Warn("refusing job not targeted at this agent", zap.String("jid", body.JID),
			zap.String("tgt", body.Tgt), zap.String("tgt_type", body.TgtType))
		return
	}
	ok, why, err := a.jobs.take(body, link)
	if err != nil {
		a.log.Error("job log: the job runs, but a restart would not know it ran", zap.String("jid", body.JID), zap.Error(err))
	}
	if !ok {
		// No return: the job's own return, if any, is the one the
		// master keeps (a replay must not overwrite it).
		a.log.Warn("refusing job: "+why, zap.String("jid", body.JID), zap.String("fun", body.Fun),
			zap.String("master", body.Master))
		return
	}
	a.jobWG.Add(1)
	go func() {
		defer a.jobWG.Done()
		a.runJob(ctx, body, out)
	}()
}

// forMe checks the job's target against this agent's id and grains. A
// target the agent cannot evaluate alone (nodegroups, pillar) was matched
// by the master, which sent the job only to the agents it matched.
func (a *Agent) forMe(b *protocol.JobBody) bool {
	switch b.TgtType {
	case "nodegroup", "pillar", "pillar_pcre", "pillar_exact":
		return true
	}
	m, err := targets.Compile(b.Tgt, b.TgtType, targets.Options{Delimiter: b.Delimiter})
	if err != nil {
		a.log.Debug("target not checkable here", zap.String("tgt", b.Tgt), zap.Error(err))
		return true
	}
	if m.NeedsPillar() {
		return true // I@ and J@ in a compound: the master matched them
	}
	return m.Match(&targets.Minion{ID: a.cfg.ID, Grains: a.grains.Get()})
}

// runJob runs a job and queues its signed return.
func (a *Agent) runJob(ctx context.Context, b *protocol.JobBody, out *outbox) {
	var res exec.Result
	var funArgs []any
	if err := a.openSealed(b); err != nil {
		a.log.Warn("refusing a sealed job", zap.String("jid", b.JID), zap.Error(err))
		res = exec.Result{Return: "refused: " + err.Error(), Retcode: 1}
		funArgs = b.ReturnFunArgs()
	} else if len(b.Funs) > 0 {
		res, funArgs = a.runCompound(ctx, b) // compound.go
	} else {
		res = a.exec.Run(ctx, exec.Request{
			JID: b.JID, Fun: b.Fun, Args: b.Arg, Kwargs: b.Kwarg, Tgt: b.Tgt, TgtType: b.TgtType, User: b.User,
			Timeout: time.Duration(b.Timeout) * time.Second,
		})
		funArgs = b.ReturnFunArgs()
	}
	ret := &protocol.ReturnBody{
		ID: a.cfg.ID, JID: b.JID, Fun: b.Fun, FunArgs: funArgs,
		Return: res.Return, Retcode: res.Retcode, Success: res.Success,
	}
	if b.Fun == "firmware.update" && a.Handoff() != nil {
		defer a.handOver(ctx, out) // firmware.go: once the return is queued
	}
	if a.queueReturn(out, ret) != nil {
		// Lost (logged): let the next start report the job killed
		// rather than silent.
		return
	}
	if err := a.jobs.done(b); err != nil {
		a.log.Warn("job log", zap.String("jid", b.JID), zap.Error(err))
	}
}

// queueReturn stamps ret and puts it in out.
func (a *Agent) queueReturn(out *outbox, ret *protocol.ReturnBody) error {
	ret.Stamp = event.Stamp(time.Now())
	// A return that cannot be encoded, or would not fit in a frame, still
	// answers the job, with a failure saying why.
	enc, err := protocol.Marshal(ret)
	if err != nil {
		a.log.Error("encode return", zap.String("jid", ret.JID), zap.Error(err))
		ret.Return = "return could not be encoded: " + err.Error()
		ret.Retcode, ret.Success = 1, false
		enc = nil
	} else if max := protocol.DefaultMaxFrame - 4096; len(enc) > max {
		a.log.Error("return too large", zap.String("jid", ret.JID), zap.Int("bytes", len(enc)))
		ret.Return = fmt.Sprintf("return too large: %d bytes encoded, the limit is %d", len(enc), max)
		ret.Retcode, ret.Success = 1, false
		enc = nil
	}
	if enc == nil {
		if enc, err = protocol.Marshal(ret); err != nil {
			a.log.Error("encode return; dropped", zap.String("jid", ret.JID), zap.Error(err))
			return err
		}
	}
	return a.spoolItem(out, protocol.TypeReturn, enc, ret.JID)
}

// spoolItem puts a return or an event in the outbox, logging a failure
// (what is not on disk is lost) and the items dropped for room.
func (a *Agent) spoolItem(out *outbox, kind protocol.Type, body []byte, what string) error {
	dropped, err := out.pushDurable(kind, body)
	if err != nil {
		a.log.Error("outbox: cannot keep a "+kind.String(), zap.String("what", what), zap.Error(err))
		return err
	}
	if dropped > 0 {
		a.log.Warn("outbox full (spool_max): dropped the oldest returns and events waiting for the master",
			zap.Int("dropped", dropped))
	}
	return nil
}

// SendEvent signs an event from this agent and queues it for the master.
func (a *Agent) SendEvent(tag string, data map[string]any) error {
	if tag == "" || len(tag) > protocol.MaxTagLen {
		return fmt.Errorf("event tag must be 1 to %d bytes", protocol.MaxTagLen)
	}
	if event.ReservedForMaster(tag) {
		return fmt.Errorf("tag %q is reserved for the master", tag)
	}
	enc, err := protocol.Marshal(&protocol.EventBody{ID: a.cfg.ID, Tag: tag, Data: data, Stamp: event.Stamp(time.Now())})
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	// The local bus gets its own copy: Publish stamps the map it is given,
	// and data is also the body the outbox sends later.
	local := make(map[string]any, len(data)+1)
	for k, v := range data {
		local[k] = v
	}
	a.bus.Publish(tag, local)
	// Every master gets it (hot mode: each its own outbox).
	var firstErr error
	for _, out := range a.outs {
		if err := a.spoolItem(out, protocol.TypeEvent, enc, tag); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("queue event for the master: %w", err)
		}
	}
	if firstErr != nil {
		return firstErr
	}
	return nil
}

// seal returns the wire form of a spooled return or event: its body
// tagged for this session, under seq (0: no ack wanted).
func (a *Agent) seal(it spoolItem, seq uint64, macKey []byte) (protocol.Message, error) {
	switch it.kind {
	case protocol.TypeReturn:
		b := new(protocol.ReturnBody)
		if err := protocol.Unmarshal(it.body, b); err != nil {
			return nil, err
		}
		var r *protocol.Return
		var err error
		if macKey != nil {
			r, err = protocol.MACReturn(macKey, b)
		} else {
			r, err = protocol.SignReturn(a.id.Priv, b)
		}
		if err != nil {
			return nil, err
		}
		r.Seq = seq
		return r, nil
	case protocol.TypeEvent:
		b := new(protocol.EventBody)
		if err := protocol.Unmarshal(it.body, b); err != nil {
			return nil, err
		}
		var e *protocol.Event
		var err error
		if macKey != nil {
			e, err = protocol.MACEvent(macKey, b)
		} else {
			e, err = protocol.SignEvent(a.id.Priv, b)
		}
		if err != nil {
			return nil, err
		}
		e.Seq = seq
		return e, nil
	}
	return nil, fmt.Errorf("outbox item of type %s", it.kind)
}

// reportKilled answers the jobs that were running when the agent last
// stopped without finishing them (killed, crashed, or its device lost
// power): what is left of their processes is killed, and each gets a
// failed return, so that the master has an answer instead of silence. (If
// the agent died just after queueing the job's own return, the master
// keeps that one, the first, and ignores this.)
func (a *Agent) reportKilled() {
	// Not shared yet: New calls this.
	for _, r := range a.jobs.running {
		n, err := exec.KillJobProcesses(a.cfg.ID, r.JID)
		a.log.Warn("job was running when the agent stopped; reported killed", zap.String("jid", r.JID),
			zap.String("fun", r.Fun), zap.Int("processes_killed", n), zap.Error(err))
		out := a.out
		for _, l := range a.links {
			if l.addr == r.Link {
				out = l.out
			}
		}
		if a.queueReturn(out, &protocol.ReturnBody{
			ID: a.cfg.ID, JID: r.JID, Fun: r.Fun, Retcode: exec.RetcodeGeneric,
			Return: "ERROR: job " + r.JID + " (" + r.Fun + ") was killed: the agent stopped while it ran",
		}) != nil {
			continue
		}
		if err := a.jobs.finish(r); err != nil {
			a.log.Warn("job log", zap.String("jid", r.JID), zap.Error(err))
		}
	}
}
