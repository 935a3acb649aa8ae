package relay

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/relay/discovery"
)

// Options are what a relay needs from the agent it runs in.
type Options struct {
	Config   *config.Agent // Config.Relay is the relay: section (required)
	Identity *protocol.Identity
	Version  string
	Log      *zap.Logger
	// Event fires an event as the relay's own agent (to the master through
	// its own session, spooled while it is away); nil: none.
	Event func(tag string, data map[string]any) error
	// Listen overrides relay: interface and port (tests: "127.0.0.1:0").
	Listen string
	// Pillar returns the relay's own pillar as last received (the
	// agent's Pillar): the proxy minions' password_pillar is read there.
	// nil: none.
	Pillar func() map[string]any
}

// Relay is a running relay. Make it with New, start it with Run.
type Relay struct {
	o    Options
	conf *config.Relay
	log  *zap.Logger

	ready chan struct{}
	addr  net.Addr

	mu      sync.RWMutex
	devices map[string]*device // accepted by the master, by id
	// handshaking counts the devices whose Hello waits for the master's
	// answer; with devices, bounded by max_devices.
	handshaking int
	hellos      chan struct{} // helloSlots (device.go)

	link atomic.Pointer[link]
	// linkUps counts the upstream links that came up (linkLoop resets its
	// backoff after one).
	linkUps atomic.Int64
	store   *store
	chunks  *chunks               // file chunks by hash (chunks.go)
	disc    *discovery.Discoverer // nil: no discovery: section
	// The proxy minions (proxies.go): the config's, then those the
	// master added at run time (dynproxy.go), under proxyMu.
	proxyMu    sync.RWMutex
	proxies    []*proxySession
	proxyByID  map[string]*proxySession
	proxyHTTP  *http.Client
	proxyAdded chan struct{} // wakes proxyLoop: a proxy minion was added
	// linkChanged wakes proxyLoop when a link comes up; stopping is
	// closed when Run begins to stop (the proxy minions' calls end).
	linkChanged  chan struct{}
	stopping     chan struct{}
	proxyRefused atomic.Uint64 // proxy minions' Hellos the master refused, ever
	proxyReturns atomic.Uint64 // proxy minions' returns made (sent, kept or dropped), ever
	admit        *bucket       // device sessions opened upstream, per second
	// handshakes bounds the devices' QUIC handshakes a second: past it a
	// device is refused at once (CONNECTION_REFUSED, before any crypto)
	// and retries after a short random pause, so a reconnect storm costs
	// the relay a bounded rate of handshakes that all finish, rather than
	// more than it can do, most of which time out and are tried again.
	handshakes *bucket
	refused    atomic.Uint64 // handshakes refused for the rate, ever
	deferred   atomic.Uint64 // Initials dropped while maxHandshakes were in progress, ever

	wg sync.WaitGroup // device sessions and their goroutines

	droppedDevices atomic.Uint64 // devices dropped for bad behaviour
	throttled      atomic.Uint64 // returns and events that waited for the device's rate
	batches        atomic.Uint64 // batches sent to the master
	reported       uint64        // spool drops already reported; linkLoop only

	// tamper, set only by tests, alters frames the relay forwards (jobs
	// down, returns and events up), to show that the ends refuse them.
	tamper func(protocol.Type, []byte) []byte
	// dump, set only by tests, is handed every byte the relay reads
	// from devices and from the master (tap).
	dump func([]byte)
	// maxCaps, set only by tests, caps the capability the master tells
	// the link (0: as told), to play an older master.
	maxCaps uint32
	// beforeTakeIn, set only by tests, runs between reading a device's
	// accepted status and taking the device in.
	beforeTakeIn func(id string)
	// holdProxyStatus, set only by tests, makes the relay leave a pending
	// proxy minion's stream unread while it says true (a status that has
	// not come yet).
	holdProxyStatus func(id string) bool

	// The jobs fanned out in the last recentJobAge (recent.go).
	recentMu    sync.Mutex
	recent      []recentJob
	recentBytes int
}

// New checks the options; Run starts the relay.
func New(o Options) (*Relay, error) {
	if o.Config == nil || o.Config.Relay == nil {
		return nil, errors.New("relay: no relay: section")
	}
	if o.Identity == nil || o.Log == nil {
		return nil, errors.New("relay: identity and logger are required")
	}
	if len(o.Config.MasterAddrs()) == 0 || o.Config.MasterType == "disable" {
		return nil, errors.New("relay: a relay needs a master to relay to (master:)")
	}
	c := o.Config.Relay
	r := &Relay{
		o: o, conf: c, log: o.Log,
		ready:   make(chan struct{}),
		devices: make(map[string]*device),
		hellos:  make(chan struct{}, helloSlots),
		store:   newStore(o.Config.RelaySpoolDir(), int64(c.SpoolMax), o.Log),
		admit:   newBucket(c.Admit, c.Admit),
		// A burst of a quarter second's worth: a device that was
		// refused comes back within about a second (agent/links.go).
		handshakes:  newBucket(c.Admit, max(c.Admit/4, 1)),
		linkChanged: make(chan struct{}, 1),
		proxyAdded:  make(chan struct{}, 1),
		stopping:    make(chan struct{}),
	}
	if err := r.newProxies(); err != nil {
		return nil, err
	}
	r.store.onLost = r.spoolDropped
	if c.Discovery != nil {
		d, err := discovery.New(discovery.Options{Config: c.Discovery, Relay: o.Config.ID,
			Dir: filepath.Join(o.Config.CacheDir, "discovery"), Log: o.Log.Named("discovery"),
			Event: o.Event, Managed: r.managedAddrs})
		if err != nil {
			return nil, err
		}
		r.disc = d
	}
	if tamperHook != nil {
		r.tamper = tamperHook()
	}
	if dumpHook != nil {
		r.dump = dumpHook()
	}
	return r, nil
}

// Ready is closed once the relay listens; Addr is valid from then.
func (r *Relay) Ready() <-chan struct{} { return r.ready }

// Addr is the UDP address the relay listens on for devices.
func (r *Relay) Addr() net.Addr { return r.addr }

// Run listens for devices and keeps the upstream link until ctx ends; it
// returns once every goroutine it started has exited.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.store.open(); err != nil {
		return err
	}
	var cache *chunkCache
	if r.conf.ChunkCacheBytes > 0 {
		var err error
		if cache, err = openChunkCache(r.o.Config.RelayChunkDir(), int64(r.conf.ChunkCacheBytes), r.log); err != nil {
			r.store.close()
			return err
		}
	}
	r.chunks = newChunks(cache)
	// Deferred first, so it runs last: after every device has gone.
	defer func() {
		if err := r.store.close(); err != nil {
			r.log.Warn("relay spool", zap.Error(err))
		}
	}()
	addr := r.o.Listen
	if addr == "" {
		addr = net.JoinHostPort(r.conf.Interface, strconv.Itoa(r.conf.Port))
	}
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("relay listen on %s: %w", addr, err)
	}
	pc, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return fmt.Errorf("relay listen on %s: %w", addr, err)
	}
	defer pc.Close() // the Transport does not close a conn it was given
	tr := &quic.Transport{Conn: pc, StatelessResetKey: protocol.StatelessResetKey(r.o.Identity)}
	defer tr.Close()
	tc := r.deviceTLS(time.Now())
	ln, err := tr.Listen(tc, r.deviceQUICConfig())
	if err != nil {
		return fmt.Errorf("relay listen on %s: %w", addr, err)
	}
	defer ln.Close()
	r.addr = ln.Addr()
	r.log.Info("relay listening for devices", zap.Stringer("addr", r.addr),
		zap.String("finger", protocol.Fingerprint(r.o.Identity.Pub)), zap.Int("max_devices", r.conf.MaxDevices))
	close(r.ready)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.acceptDevices(gctx, ln) })
	g.Go(func() error { return r.linkLoop(gctx) })
	g.Go(func() error { return r.heartbeatLoop(gctx) })
	g.Go(func() error { return r.ackLoop(gctx) })
	g.Go(func() error { return r.ticketLoop(gctx, tc) })
	if r.disc != nil {
		g.Go(func() error { return r.disc.Run(gctx) })
	}
	g.Go(func() error { return r.proxyLoop(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		close(r.stopping)
		ln.Close()
		for _, d := range r.snapshot() {
			d.close(protocol.KindShutdown, "relay shutting down")
		}
		return nil
	})
	err = g.Wait()
	r.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// deviceTLS is the TLS configuration of the device listener: the
// identity's, with session ticket keys derived from it
// (protocol.Identity.TicketKeys), so that a device that comes back, also
// after the relay restarted, resumes its TLS session instead of a full
// handshake (see protocol/tickets.go for why that leaves identity bound).
func (r *Relay) deviceTLS(now time.Time) *tls.Config {
	tc := r.o.Identity.ServerTLS()
	tc.SetSessionTicketKeys(r.o.Identity.TicketKeys(now))
	return tc
}

// ticketLoop moves the device listener's ticket keys on to the next
// period as it comes (protocol.TicketKeyPeriod), checking hourly.
func (r *Relay) ticketLoop(ctx context.Context, tc *tls.Config) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			tc.SetSessionTicketKeys(r.o.Identity.TicketKeys(now))
		}
	}
}

// errBusy refuses a device's handshake over the relay's rate.
var errBusy = errors.New("relay: handshake rate reached")

// deviceQUICConfig is the QUIC configuration of the device listener:
// Halite's, with the handshake rate (relay: admit) applied before the
// handshake begins.
func (r *Relay) deviceQUICConfig() *quic.Config {
	idle := time.Duration(r.conf.DeviceTimeout) * time.Second
	qc, plain := deviceQUIC(idle), deviceQUIC(idle)
	qc.GetConfigForClient = func(*quic.ClientInfo) (*quic.Config, error) {
		if !r.handshakes.take(time.Now()) {
			r.refused.Add(1)
			return nil, errBusy
		}
		return plain, nil
	}
	qc.MaxHandshakes = maxHandshakes(r.conf.Admit)
	qc.OnHandshakeDropped = func() { r.deferred.Add(1) }
	return qc
}

// maxHandshakes bounds the device handshakes in progress at once: half a
// second's worth of the admit rate, and at least minHandshakes (a
// handshake is round trips, not only CPU: at 4 in progress, a relay whose
// handshakes take a second under load would finish 4 a second). Past it a device's Initial is dropped
// before any crypto, as if lost; its QUIC sends it again after its probe
// timeout (tools/quicfork, 80-handshake-limit.patch). The rate alone let a
// reconnect storm begin handshakes faster than the relay's CPU finished
// them, on a machine slower than the rate assumes: thousands timed out on
// the devices after the relay had done their expensive part, and began
// again (docs/BENCHMARKS.md).
func maxHandshakes(admit int) int { return max(admit/2, minHandshakes) }

const minHandshakes = 16

// Flow control of what a device sends the relay. A device sends its Hello
// (at most protocol.MaxHelloFrame), returns and events of a few hundred
// bytes, and requests; quic-go's defaults (512 KiB a stream at first, 768
// KiB a connection, growing to 6 and 15 MiB) are sized for bulk transfer.
// Data a device sent that the relay has not read is held in the relay's
// memory; the relay stops reading a device that is over its event_rate,
// so the initial connection window is what each throttled device can
// make it hold, and the maximum what a fast one can.
const (
	deviceStreamWindow    = 32 << 10
	deviceMaxStreamWindow = 512 << 10
	deviceConnWindow      = 48 << 10
	deviceMaxConnWindow   = 768 << 10
)

// deviceQUIC is Halite's QUIC configuration with the device listener's
// flow control, and one stream a connection: a device opens exactly one.
// The relay drops a device silent for idle (relay: device_timeout) and
// sends no keep-alives: its devices do, after half of idle (see
// protocol.AgentQUICConfig), one PING and its ACK instead of a pair from
// each side. It advertises the device hop's max_ack_delay
// (protocol.DeviceMaxAckDelay): its acks are late while it works through
// a thousand devices' returns. A device's packets go out on its connection's goroutine
// (SendInline, tools/quicfork): a device is sent a few packets a job, and
// a goroutine and a hand-off per packet cost more than they save.
func deviceQUIC(idle time.Duration) *quic.Config {
	qc := protocol.QUICConfig()
	if idle > 0 {
		qc.MaxIdleTimeout = idle
	}
	qc.KeepAlivePeriod = 0
	qc.InitialStreamReceiveWindow = deviceStreamWindow
	qc.MaxStreamReceiveWindow = deviceMaxStreamWindow
	qc.InitialConnectionReceiveWindow = deviceConnWindow
	qc.MaxConnectionReceiveWindow = deviceMaxConnWindow
	qc.MaxIncomingStreams = 1
	qc.MaxAckDelay = protocol.DeviceMaxAckDelay
	qc.SendInline = true
	return qc
}

// acceptDevices accepts device connections until ctx ends.
func (r *Relay) acceptDevices(ctx context.Context, ln *quic.Listener) error {
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, quic.ErrServerClosed) {
				return nil
			}
			return fmt.Errorf("accept device: %w", err)
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.serveDevice(ctx, conn)
		}()
	}
}

// snapshot returns the devices connected now.
func (r *Relay) snapshot() []*device {
	r.mu.RLock()
	defer r.mu.RUnlock()
	all := make([]*device, 0, len(r.devices))
	for _, d := range r.devices {
		all = append(all, d)
	}
	return all
}

// managedAddrs returns the addresses the accepted devices' sessions come
// from, with their ids: discovery marks the devices found there managed.
func (r *Relay) managedAddrs() map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, d := range r.snapshot() {
		if !d.accepted.Load() {
			continue
		}
		if ua, ok := d.conn.RemoteAddr().(*net.UDPAddr); ok {
			if a, ok := netip.AddrFromSlice(ua.IP); ok {
				out[a.Unmap()] = d.id
			}
		}
	}
	return out
}

// Discovery returns the relay's discovery (nil: no discovery: section).
func (r *Relay) Discovery() *discovery.Discoverer { return r.disc }

// Stats is what a relay reports in its heartbeat.
type Stats struct {
	Devices        int    // connected and accepted by the master
	Upstream       bool   // the upstream link is up
	SpoolBytes     int64  // returns and events held for the master (their wire frames)
	SpoolItems     int    //
	SpoolDisk      int64  // bytes of the spool's segment files (bounded by spool_max)
	SpoolDropped   uint64 // items dropped, ever: for room, unwritable, or left by the previous run (their devices resent them)
	SpoolFailed    uint64 // items dropped because they could not be written (a full disk), ever
	SpoolCorrupt   uint64 // bytes of the spool's segments dropped as damaged when they were loaded, ever
	DroppedDevices uint64 // devices disconnected for bad behaviour, ever
	Throttled      uint64 // returns and events held back by event_rate, ever
	Refused        uint64 // device handshakes refused for the admit rate, ever
	Deferred       uint64 // devices' first packets dropped while admit/4 handshakes were in progress, ever
	Batches        uint64 // batches of returns and events sent to the master, ever
	ChunkUpBytes   uint64 // bytes of file chunks fetched from the master, ever
	ChunkMisses    uint64 // chunks fetched from the master, ever
	ChunkHits      uint64 // chunks served from the chunk cache, ever
	ChunkShared    uint64 // chunks served from a fetch made for another device, ever
	ChunkCached    int64  // bytes in the chunk cache now
}

// Stats returns the relay's counters now.
func (r *Relay) Stats() Stats {
	n := 0
	for _, d := range r.snapshot() {
		if d.accepted.Load() {
			n++
		}
	}
	b, items, dropped := r.store.stats()
	disk, failed := r.store.usage()
	st := Stats{Devices: n, Upstream: r.link.Load() != nil, SpoolBytes: b, SpoolItems: items, SpoolDisk: disk,
		SpoolDropped: dropped, SpoolFailed: failed, SpoolCorrupt: r.store.corruptBytes(), DroppedDevices: r.droppedDevices.Load(), Throttled: r.throttled.Load(),
		Refused: r.refused.Load(), Deferred: r.deferred.Load(), Batches: r.batches.Load()}
	if c := r.chunks; c != nil {
		st.ChunkUpBytes, st.ChunkMisses, st.ChunkHits, st.ChunkShared = c.upBytes.Load(), c.misses.Load(), c.hits.Load(), c.shared.Load()
		if c.cache != nil {
			_, st.ChunkCached = c.cache.stats()
		}
	}
	return st
}

// event fires an event as the relay's agent.
func (r *Relay) event(tag string, data map[string]any) {
	if r.o.Event == nil {
		return
	}
	if err := r.o.Event(tag, data); err != nil {
		r.log.Warn("relay event", zap.String("tag", tag), zap.Error(err))
	}
}

func (r *Relay) deviceTag(id, what string) string {
	return "halite/relay/" + r.o.Config.ID + "/device/" + id + "/" + what
}

// heartbeatLoop fires halite/relay/<id>/heartbeat every relay: heartbeat
// seconds.
func (r *Relay) heartbeatLoop(ctx context.Context) error {
	if r.conf.Heartbeat <= 0 {
		return nil
	}
	t := time.NewTicker(time.Duration(r.conf.Heartbeat) * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st := r.Stats()
		beat := map[string]any{
			"devices": st.Devices, "upstream": st.Upstream, "spool_bytes": st.SpoolBytes,
			"spool_items": st.SpoolItems, "spool_disk": st.SpoolDisk, "spool_dropped": st.SpoolDropped,
			"spool_failed": st.SpoolFailed, "spool_corrupt_bytes": st.SpoolCorrupt, "devices_dropped": st.DroppedDevices,
			"throttled": st.Throttled, "handshakes_refused": st.Refused,
			"handshakes_deferred": st.Deferred, "batches": st.Batches,
			"chunk_up_bytes": st.ChunkUpBytes, "chunk_misses": st.ChunkMisses, "chunk_hits": st.ChunkHits,
			"chunk_shared": st.ChunkShared, "chunk_cache_bytes": st.ChunkCached,
		}
		if all, up := r.proxyStats(); all > 0 {
			beat["proxies"], beat["proxies_up"] = all, up
		}
		if r.disc != nil {
			ds := r.disc.Stats()
			beat["discovered"], beat["discovery_full"], beat["discovery_refused"] = ds.Devices, ds.Full, ds.Rejected
		}
		r.event("halite/relay/"+r.o.Config.ID+"/heartbeat", beat)
	}
}

// pinMaster checks the master's key on the upstream link: master_finger,
// else the key the relay's own agent session pinned
// (pki_dir/minion_master.pub, protocol.MasterPinFile); with neither, the first key seen is
// accepted (the agent session records it).
func (r *Relay) pinMaster(pub ed25519.PublicKey) error {
	fp := protocol.Fingerprint(pub)
	if f := r.o.Config.MasterFinger; f != "" {
		if !protocol.SameFingerprint(f, fp) {
			return fmt.Errorf("master key fingerprint %s does not match master_finger %s", fp, f)
		}
		return nil
	}
	if old, err := readPub(filepath.Join(r.o.Config.PkiDir, protocol.MasterPinFile)); err == nil && !old.Equal(pub) {
		return fmt.Errorf("master key %s is not the pinned one %s", fp, protocol.Fingerprint(old))
	}
	return nil
}
