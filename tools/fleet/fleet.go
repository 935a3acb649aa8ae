// Package fleet simulates a fleet of agents in one process: each simulated
// agent has its own ed25519 identity and its own QUIC connection to a real
// master, speaks the real protocol, verifies every job's signature and
// signs every return, but runs no modules: it answers test.ping (true) and
// test.echo (its first argument) and fails anything else, unless
// Options.Exec runs the jobs (tools/fleetsim -states runs the agent's state
// engine there). Connections share a few UDP sockets, as a relay's would.
//
// On the wire a simulated agent is the agent (agent/session.go dial): the
// same QUIC configuration (protocol.QUICConfig, keep-alives included),
// TLS with its own key and certificate, the Hello as protocol.EncodeHello
// makes it with Caps protocol.CapabilityVersion and a signed key agreement,
// returns MAC-tagged with the session's key. The differences: the agent
// dials from a UDP socket of its own (quic.DialAddr, so its QUIC connection
// IDs are empty), while here Options.PerSocket connections share a socket
// and a quic.Transport (so that 50,000 do not need 50,000 descriptors and
// ephemeral ports) and their connection IDs are quic-go's 4 bytes; the
// Hello's version is "fleetsim" and it names no returners; returns are
// written at once rather than from an outbox that waits for acks. Per
// device the process holds the QUIC connection (quic-go: its run loop
// and its send queue, two goroutines), one goroutine reading the session,
// the framer's 1 KiB buffer and the key, made at the first dial; a job
// every device gets (the same frame) is decoded and verified once.
package fleet

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/protocol"
)

// Options shape a simulated fleet.
type Options struct {
	N         int    // agents
	Prefix    string // ids are Prefix + a 5-digit number; default "sim-"
	PerSocket int    // connections per UDP socket; default 500
	MasterFP  string // the master's fingerprint to pin; "" trusts any
	Grains    map[string]any
	// GrainsFor, if set, gives each agent its own grains (by id) instead
	// of Grains.
	GrainsFor func(id string) map[string]any
	// Exec, if set, runs every job instead of the built-in test.ping and
	// test.echo, as the agent's executor does: in a goroutine of its own,
	// the return going back when it is done. It gets the agent's id and
	// the verified job, which other agents may share (read-only), and
	// returns what the agent's return carries.
	Exec       func(ctx context.Context, id string, b *protocol.JobBody) (ret any, retcode int, success bool)
	MaxBackoff time.Duration // reconnect backoff ceiling; default 5s
	// AuthTimeout is the agent's auth_timeout: how long one try may go
	// unanswered (QUIC's handshake idle timeout). Unset, the agent's
	// default for one master or relay, protocol.PatientHandshakeIdleTimeout.
	// A try gets twice that, at least 10 s, as the agent's.
	AuthTimeout time.Duration
	// Seed, if set, derives every agent's key from it and the agent's id
	// (else keys are random), so that PreAccept can record them first.
	Seed string
	// Ramp, if set, starts this many agents a second instead of all at
	// once (a fleet enrolling, rather than a reconnect storm).
	Ramp int
	// Addrs, if set, are relays (or masters) to spread the agents over:
	// agent i dials Addrs[i%len(Addrs)] instead of Start's addr.
	Addrs []string
	// Firmware makes the agents run firmware.update (firmware.go): fetch
	// the build's chunks, fire halite/firmware/<id>/updated.
	Firmware bool
}

// Fleet is a running simulated fleet.
type Fleet struct {
	opts       Options
	addr       string
	transports []*quic.Transport
	agents     []*simAgent
	connected  atomic.Int64
	jobs       atomic.Int64

	// verified remembers jobs whose signature was checked: every simulated
	// device receives the same signed bytes, and N real devices would check
	// them on N CPUs at once, not one after another on the simulator's.
	census *census // FLEETSIM_CENSUS=1

	errMu sync.Mutex
	errs  map[string]int // why sessions ended or failed, counted

	fetchMu    sync.Mutex
	fetchTimes []time.Duration

	verifiedMu sync.Mutex
	verified   map[string]verifiedJob // by frame
	bySig      map[string]verifiedJob // by master key, signature and body
	wg         sync.WaitGroup
	cancel     context.CancelFunc
}

type simAgent struct {
	up     atomic.Int64 // when its current session was accepted (unix ns); 0: none
	id     string
	ident  *protocol.Identity // made at its first dial (keepConnected)
	master atomic.Pointer[ed25519.PublicKey]
	tr     *quic.Transport
	// tickets keeps its last session's TLS ticket, to resume with
	// (unless FLEETSIM_NO_RESUME=1)
	tickets *protocol.SessionCache
	fr      atomic.Pointer[protocol.Framer] // the current session's, for Fetch
	blobs   blobWaits                       // blobs.go
	// gotJob and sentRet: when its last job arrived and its return was
	// written (unix ns), for -phases' account of a round's slowest devices.
	gotJob, sentRet atomic.Int64
}

// Start connects opts.N agents to the master at addr and keeps them
// connected (reconnecting with jittered backoff) until Close.
func Start(addr string, opts Options) (*Fleet, error) {
	if opts.Prefix == "" {
		opts.Prefix = "sim-"
	}
	if opts.PerSocket <= 0 {
		opts.PerSocket = 500
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{opts: opts, addr: addr, cancel: cancel, verified: map[string]verifiedJob{}, bySig: map[string]verifiedJob{}}
	if os.Getenv("FLEETSIM_CENSUS") == "1" {
		f.census = &census{counts: map[string]int{}}
	}
	for i := 0; i < opts.N; i++ {
		if i%opts.PerSocket == 0 {
			pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("open udp socket: %w", err)
			}
			f.transports = append(f.transports, &quic.Transport{Conn: pc})
		}
		// The key (and its certificate, an ed25519 signature) is made
		// when the agent first dials: with a ramp, spread over it rather
		// than all before the first dial.
		a := &simAgent{id: agentID(opts, i), tr: f.transports[len(f.transports)-1]}
		if os.Getenv("FLEETSIM_NO_RESUME") != "1" {
			a.tickets = new(protocol.SessionCache)
		}
		f.agents = append(f.agents, a)
	}
	addrs := opts.Addrs
	if len(addrs) == 0 {
		addrs = []string{addr}
	}
	udps := make([]*net.UDPAddr, len(addrs))
	for i, a := range addrs {
		udp, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("resolve %s: %w", a, err)
		}
		udps[i] = udp
	}
	run := func(i int) {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.keepConnected(ctx, f.agents[i], udps[i%len(udps)])
		}()
	}
	if opts.Ramp <= 0 {
		for i := range f.agents {
			run(i)
		}
		return f, nil
	}
	// A ramp: one goroutine starts the agents as their time comes (agent
	// i at i/Ramp s), rather than one sleeping goroutine and timer per
	// agent from the start.
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		start, next := time.Now(), 0
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for next < len(f.agents) {
			due := min(int(time.Since(start)*time.Duration(opts.Ramp)/time.Second)+1, len(f.agents))
			for ; next < due; next++ {
				run(next)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return f, nil
}

func agentID(opts Options, i int) string { return fmt.Sprintf("%s%05d", opts.Prefix, i) }

// identity is an agent's key: random, or derived from opts.Seed and its id.
func identity(opts Options, id string) (*protocol.Identity, error) {
	if opts.Seed == "" {
		return protocol.GenerateIdentity()
	}
	return protocol.NewIdentity(seededKey(opts.Seed, id))
}

func seededKey(seed, id string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed + "\x00" + id))
	return ed25519.NewKeyFromSeed(s[:])
}

// PreAccept records, as accepted, the keys of the agents Start(opts) would
// run (opts.Seed must be set) in a master's pki_dir before the master
// starts, so that a benchmark measures sessions rather than enrolment
// (two fsyncs per new key, one key at a time).
func PreAccept(pkiDir string, opts Options) error {
	if opts.Seed == "" {
		return errors.New("PreAccept needs Options.Seed")
	}
	if opts.Prefix == "" {
		opts.Prefix = "sim-"
	}
	dir := filepath.Join(pkiDir, "minions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i := 0; i < opts.N; i++ {
		name := agentID(opts, i)
		// The key alone, as identity derives it: no certificate to sign.
		pub := seededKey(opts.Seed, name).Public().(ed25519.PublicKey)
		if err := os.WriteFile(filepath.Join(dir, name), protocol.EncodePublicKey(pub), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Connected is how many agents have an accepted session now.
func (f *Fleet) Connected() int { return int(f.connected.Load()) }

// ReconnectedSince is how many agents have a session accepted after t.
func (f *Fleet) ReconnectedSince(t time.Time) int {
	n := 0
	for _, a := range f.agents {
		if a.up.Load() > t.UnixNano() {
			n++
		}
	}
	return n
}

// Jobs is how many jobs the fleet has answered.
func (f *Fleet) Jobs() int64 { return f.jobs.Load() }

// IDs lists the agents' ids.
func (f *Fleet) IDs() []string {
	out := make([]string, len(f.agents))
	for i, a := range f.agents {
		out[i] = a.id
	}
	return out
}

// Timing is when agent i last got a frame and last wrote a return (unix
// ns, 0: never); ok is false if there is no agent i.
func (f *Fleet) Timing(i int) (gotJob, sentRet int64, ok bool) {
	if i < 0 || i >= len(f.agents) {
		return 0, 0, false
	}
	a := f.agents[i]
	return a.gotJob.Load(), a.sentRet.Load(), true
}

// WaitConnected waits until n agents are connected or ctx ends.
func (f *Fleet) WaitConnected(ctx context.Context, n int) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for f.Connected() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d agents connected: %w", f.Connected(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Close disconnects every agent and waits for their goroutines.
func (f *Fleet) Close() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	for _, tr := range f.transports {
		tr.Close()
	}
}

func (f *Fleet) keepConnected(ctx context.Context, a *simAgent, addr *net.UDPAddr) {
	// The device's own context, registered with the fleet's once: each
	// dial's timeout and each session's AfterFunc then register with it,
	// not with the fleet's, whose one mutex tens of thousands of devices
	// redialling would otherwise queue on (a goroutine dump of 50,000
	// devices showed hundreds waiting there). A real agent's contexts are
	// its own too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.ident == nil {
		id, err := identity(f.opts, a.id)
		if err != nil {
			f.noteErr(err)
			return
		}
		a.ident = id
	}
	backoff := 100 * time.Millisecond
	refused := 0
	for ctx.Err() == nil {
		err := f.session(ctx, a, addr)
		if ctx.Err() != nil {
			return
		}
		f.noteErr(err)
		var na notAccepted
		var ended sessionEnded
		var te *quic.TransportError
		switch {
		case errors.As(err, &na):
			backoff = time.Second
		case errors.As(err, &ended):
			// A session that was up: start over from 1 s, as the
			// agent does after a session that lived.
			backoff, refused = time.Second, 0
		case errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused && refused < 4:
			// Refused (busy): as the agent does (agent/links.go), try
			// again after up to a second, four times, before backing off.
			refused++
			if !sleepCtx(ctx, time.Duration(rand.Int64N(int64(time.Second)))+100*time.Millisecond) {
				return
			}
			continue
		}
		refused = 0
		if !sleepCtx(ctx, time.Duration(rand.Int64N(int64(backoff)))+10*time.Millisecond) {
			return
		}
		if backoff *= 2; backoff > f.opts.MaxBackoff {
			backoff = f.opts.MaxBackoff
		}
	}
}

// Census returns the packets the devices sent and received since it was
// last called, by frames carried (FLEETSIM_CENSUS=1; else "").
func (f *Fleet) Census() string {
	if f.census == nil {
		return ""
	}
	return f.census.take()
}

// noteErr counts why a session ended or could not start.
func (f *Fleet) noteErr(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	if len(msg) > 90 {
		msg = msg[:90]
	}
	f.errMu.Lock()
	if f.errs == nil {
		f.errs = map[string]int{}
	}
	f.errs[msg]++
	f.errMu.Unlock()
}

// Errors returns why sessions ended or failed so far, counted, and
// forgets them.
func (f *Fleet) Errors() map[string]int {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	e := f.errs
	f.errs = nil
	return e
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sessionEnded wraps the end of a session that had been accepted.
type sessionEnded struct{ err error }

func (e sessionEnded) Error() string { return "session ended: " + e.err.Error() }

type notAccepted string

func (n notAccepted) Error() string { return "key " + string(n) }

func (f *Fleet) session(ctx context.Context, a *simAgent, addr *net.UDPAddr) error {
	// The peer is the master, or a relay: then the KeyStatus carries the
	// master's key, which is the one pinned and used.
	pin := func(pub ed25519.PublicKey) error {
		p := append(ed25519.PublicKey(nil), pub...)
		a.master.Store(&p)
		return nil
	}
	qc := protocol.AgentQUICConfig()
	qc.HandshakeIdleTimeout = protocol.PatientHandshakeIdleTimeout
	if f.opts.AuthTimeout > 0 {
		qc.HandshakeIdleTimeout = f.opts.AuthTimeout
	}
	dctx, cancel := context.WithTimeout(ctx, protocol.HandshakeTryTimeout(qc.HandshakeIdleTimeout))
	if f.census != nil {
		qc.Tracer = f.census.trace
	}
	tc := a.ident.ClientTLS(pin)
	if a.tickets != nil {
		tc.ClientSessionCache = a.tickets
	}
	conn, err := a.tr.Dial(dctx, addr, tc, qc)
	if err != nil {
		cancel()
		return err
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(dctx)
	cancel()
	if err != nil {
		return err
	}
	fr := protocol.NewFramer(s, 0)
	kx, err := protocol.NewKX()
	if err != nil {
		return err
	}
	grains := f.opts.Grains
	if f.opts.GrainsFor != nil {
		grains = f.opts.GrainsFor(a.id)
	}
	hello := &protocol.Hello{ID: a.id, Version: "fleetsim", Caps: protocol.CapabilityVersion, Grains: grains,
		KX: kx.Public(), KXSig: protocol.SignAgentKX(a.ident, a.id, kx.Public())}
	// As the agent does (agent/session.go dial): grains too large for a
	// Hello follow once the key is accepted.
	hb, lateGrains, err := protocol.EncodeHello(hello)
	if err != nil {
		return err
	}
	if err := fr.WriteFrame(hb); err != nil {
		return err
	}
	// As the agent does: a master (or relay) that does not answer within
	// the handshake timeout is given up on.
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := fr.Read()
	s.SetReadDeadline(time.Time{})
	if err != nil {
		return err
	}
	ks, ok := m.(*protocol.KeyStatus)
	if !ok {
		return fmt.Errorf("got %s before key status", m.Type())
	}
	if ks.Status != protocol.KeyAccepted {
		return notAccepted(ks.Status)
	}
	masterPub := *a.master.Load()
	if ks.MasterKey != nil {
		masterPub = ed25519.PublicKey(ks.MasterKey)
	}
	if f.opts.MasterFP != "" && !protocol.SameFingerprint(f.opts.MasterFP, protocol.Fingerprint(masterPub)) {
		return errors.New("master fingerprint mismatch")
	}
	if err := protocol.VerifyMasterKX(masterPub, a.id, hello.KX, ks.KX, ks.KXSig); err != nil {
		return err
	}
	macKey, err := kx.MACKey(ks.KX, a.id, hello.KX, ks.KX)
	if err != nil {
		return err
	}
	if lateGrains != nil {
		if err := fr.WriteFrame(lateGrains); err != nil {
			return err
		}
	}
	f.connected.Add(1)
	a.up.Store(time.Now().UnixNano())
	a.fr.Store(fr)
	defer func() {
		a.fr.Store(nil)
		a.blobs.lost()
		a.up.Store(0)
		f.connected.Add(-1)
	}()
	stop := context.AfterFunc(ctx, func() { conn.CloseWithError(0, "") })
	defer stop()
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			return sessionEnded{err}
		}
		a.gotJob.Store(time.Now().UnixNano())
		// A job every device gets is the same frame: decoded and
		// verified once (openJob), as N devices would on N CPUs.
		body := f.seenJob(frame, masterPub)
		if body == nil {
			m, err := protocol.Decode(frame)
			if err != nil {
				return sessionEnded{err}
			}
			if e, ok := m.(*protocol.Error); ok {
				return sessionEnded{e.Err()}
			}
			if d, ok := m.(*protocol.BlobData); ok {
				a.blobs.reply(d)
				continue
			}
			job, ok := m.(*protocol.Job)
			if !ok {
				continue
			}
			if body, err = f.openJob(frame, job, masterPub); err != nil {
				return err
			}
		}
		if _, ok := body.Kwarg[protocol.KwargSealed]; ok {
			// A sealed state job (capability 13): opened with the
			// device's key, as the agent's openSealed does
			// (agent/pillar.go), into a copy (body may be shared).
			if body, err = openSealed(a, body); err != nil {
				f.noteErr(err)
				continue
			}
		}
		if f.opts.Firmware && body.Fun == "firmware.update" {
			go f.firmware(ctx, a, body, fr, macKey)
			continue
		}
		if f.opts.Exec != nil {
			go f.exec(ctx, a, body, fr, macKey)
			continue
		}
		ret := &protocol.ReturnBody{ID: a.id, JID: body.JID, Fun: body.Fun, FunArgs: body.Arg, Success: true,
			Stamp: time.Now().UTC().Format("2006-01-02T15:04:05.000000")}
		switch body.Fun {
		case "test.ping":
			ret.Return = true
		case "test.echo":
			if len(body.Arg) > 0 {
				ret.Return = body.Arg[0]
			}
		default:
			ret.Return = "'" + body.Fun + "' is not available."
			ret.Success, ret.Retcode = false, 254
		}
		signed, err := protocol.MACReturn(macKey, ret)
		if err != nil {
			return err
		}
		if err := fr.Write(signed); err != nil {
			return err
		}
		a.sentRet.Store(time.Now().UnixNano())
		f.jobs.Add(1)
	}
}

// openSealed returns a copy of b with its sealed kwargs opened with a's
// key: the "__" kwargs sealed in it in place of __sealed__ and __keys__.
func openSealed(a *simAgent, b *protocol.JobBody) (*protocol.JobBody, error) {
	sealed, ok1 := b.Kwarg[protocol.KwargSealed].([]byte)
	keys, ok2 := b.Kwarg[protocol.KwargKeys].(map[string]any)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("job %s: malformed sealed kwargs", b.JID)
	}
	plain, err := a.ident.OpenKwargs(a.id, b.JID, sealed, keys)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", b.JID, err)
	}
	c := *b
	c.Kwarg = make(map[string]any, len(b.Kwarg))
	for k, v := range b.Kwarg {
		if k != protocol.KwargSealed && k != protocol.KwargKeys {
			c.Kwarg[k] = v
		}
	}
	for k, v := range plain {
		if strings.HasPrefix(k, "__") {
			c.Kwarg[k] = v
		}
	}
	return &c, nil
}

// exec runs a job with Options.Exec and writes its return as the agent's
// runJob does (agent/session.go): fun_args are JobBody.ReturnFunArgs.
func (f *Fleet) exec(ctx context.Context, a *simAgent, b *protocol.JobBody, fr *protocol.Framer, macKey []byte) {
	r, rc, ok := f.opts.Exec(ctx, a.id, b)
	ret := &protocol.ReturnBody{ID: a.id, JID: b.JID, Fun: b.Fun, FunArgs: b.ReturnFunArgs(), Return: r, Retcode: rc, Success: ok,
		Stamp: time.Now().UTC().Format("2006-01-02T15:04:05.000000")}
	signed, err := protocol.MACReturn(macKey, ret)
	if err != nil {
		f.noteErr(fmt.Errorf("return of %s: %w", b.Fun, err))
		return
	}
	if err := fr.Write(signed); err != nil {
		f.noteErr(fmt.Errorf("return of %s: %w", b.Fun, err))
		return
	}
	f.jobs.Add(1)
}

// verifiedJob is a job frame whose signature was checked, and by which
// master key.
type verifiedJob struct {
	master ed25519.PublicKey
	body   *protocol.JobBody
}

// seenJob is the verified body of a job frame already opened with the
// same master key, or nil.
func (f *Fleet) seenJob(frame []byte, master ed25519.PublicKey) *protocol.JobBody {
	f.verifiedMu.Lock()
	v, ok := f.verified[string(frame)]
	f.verifiedMu.Unlock()
	if ok && v.master.Equal(master) {
		return v.body
	}
	return nil
}

// openJob verifies a job (decoded from frame) once per distinct signed
// body and master key, and remembers it by its frame too, so that the
// next device to get the same frame skips decoding it.
func (f *Fleet) openJob(frame []byte, j *protocol.Job, master ed25519.PublicKey) (*protocol.JobBody, error) {
	k := string(master) + string(j.Sig) + string(j.Body)
	f.verifiedMu.Lock()
	v, ok := f.bySig[k]
	f.verifiedMu.Unlock()
	b := v.body
	if !ok {
		var err error
		if b, err = j.Open(master); err != nil {
			return nil, err
		}
	}
	f.verifiedMu.Lock()
	if len(f.verified) > 1000 || len(f.bySig) > 1000 {
		clear(f.verified)
		clear(f.bySig)
	}
	f.verified[string(frame)] = verifiedJob{master: master, body: b}
	f.bySig[k] = verifiedJob{master: master, body: b}
	f.verifiedMu.Unlock()
	return b, nil
}
