package master

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/unixsock"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/master/blobs"
	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/master/pillar"
	"github.com/halite-fleet/halite/master/retroute"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/schedule"
)

// Version is the master's version, sent to agents and shown by test.version.
var Version = version.Version

// Master is a running Halite master. Make it with New, start it with Run.
// Its parts are listed in the order New builds them and Run starts them
// (doc.go says what each is).
type Master struct {
	// afterAttach, if set (tests), is called once a direct agent's session
	// is attached, before its KeyStatus is written.
	afterAttach func(*session)

	cfg  *config.Master
	log  *zap.Logger
	id   *protocol.Identity
	name string // the master's id
	jids event.JIDGen

	// runnerTable is runners(), built once (runnersOnce); callers must
	// not change it.
	runnersOnce sync.Once
	runnerTable map[string]callFunc
	// loadWG counts the reactor's jobs whose load is still being
	// committed (reactLocal); Run waits for them before closing the cache.
	loadWG sync.WaitGroup

	// Keys: the key store (package keys), and what bounds the agents
	// that wait on it.
	keys *keys.Store
	// newKeys bounds the keys of unknown ids per source (newkeys.go).
	newKeys *newKeyLimiter
	// notAcceptedLog logs a pending agent's retries once a minute
	// (logevery.go).
	notAcceptedLog *logEvery
	keyWait        *keyWaiters // pending agents held (keywait.go)

	// The job cache (package jobcache), purged by cleanLoop.
	cache *jobcache.Cache

	// The event bus: every part fires on it; the reactor, the returners'
	// event_return, the engines and the CLIs' state.event read it.
	bus *event.Bus

	// Sessions: the agents' and relays' connections (agents.go,
	// relays.go, runSessions), with the grains and mine they bring.
	minions *registry
	relays  relays        // connected relays' links (relays.go)
	hellos  chan struct{} // helloSlots (agents.go)
	held    heldState     // returns not stored yet (held.go)
	mine    *mineStore    // the agents' mine data (mine.go); see mineStore()
	// pillar compiles and keeps each device's pillar (pillar.go, package
	// master/pillar): pillar targets, the state compiler, the runners.
	pillar *pillar.Compiler
	// The relays' site inventories (discovery.go); see discovery().
	disc     *discoveryStore
	discOnce sync.Once

	// The publisher's state compile (states.go): files serves
	// file_roots' salt:// files, one server for the whole master.
	files *fileserver.Server
	// blobs: the chunks the master serves by hash (blobserve.go).
	blobs     *blobs.Index
	blobSlots chan struct{}
	// pillarFor compiles a device's pillar (package pillar); nil: every
	// device's pillar is empty. The state compile (pillarOf) and the
	// agents' PillarGet (pillarcall.go) read it.
	pillarFor func(ctx context.Context, id string) (map[string]any, error)
	mineOnce  sync.Once
	functions seenFunctions // function names seen, for completion (functions.go)

	// The publisher (publish.go) has no part of its own: publish runs in
	// its callers (the local API, the reactor, runners, the schedule).

	// Returners: the returner routing and its queues (package retroute).
	returners *retroute.Router
	// The reactor (reactor.go).
	reactor *masterReactor
	// Engines (engines.go).
	engines *masterEngines
	// The schedule (schedule.go), and where each of its jobs was set
	// (file:line), for its errors; replaced by Reload.
	sched   *schedule.Scheduler
	schedAt atomic.Pointer[map[string]string]
	// Metrics: counted as the master goes, served on metrics_port
	// (metrics.go).
	metrics *masterMetrics
	// The local API's runners and wheel read everything above;
	// localCall is salt.cmd's functions (runners_salt.go).
	localCall LocalCall

	ready   chan struct{}
	addr    net.Addr
	closing chan struct{}

	connWG sync.WaitGroup // agent connections and API requests
}

// New builds the master's parts, in order: its identity, the key store,
// the job cache, the event bus, the sessions' registry, the returners, the
// reactor, the engines and the schedule. It checks their options (a bad
// one is an error naming it) and does not listen yet.
func New(cfg *config.Master, log *zap.Logger) (*Master, error) {
	m := &Master{
		cfg:       cfg,
		log:       log,
		metrics:   newMasterMetrics(),
		files:     fileserver.New(cfg.FileRoots),
		blobs:     blobs.New(0),
		blobSlots: make(chan struct{}, blobSlots),
		ready:     make(chan struct{}),
		closing:   make(chan struct{}),
	}
	m.files.Manifests = m.blobs.Add
	m.jids.UTC = cfg.UTCJID
	m.jids.Node, m.jids.HasNode = jidNode(cfg), true
	id, created, err := protocol.LoadOrCreateIdentity(cfg.PkiDir, "master")
	if err != nil {
		return nil, fmt.Errorf("master identity: %w", err)
	}
	if created {
		log.Info("made a new master key", zap.String("pki_dir", cfg.PkiDir), zap.String("finger", protocol.Fingerprint(id.Pub)))
	}
	m.id = id
	host, _ := os.Hostname()
	m.name = host + "_master"
	if cfg.ID != "" {
		m.name = cfg.ID
	}

	// Keys.
	m.keyWait = newKeyWaiters(maxHeldPending)
	m.keys, err = keys.Open(cfg.PkiDir, keys.Options{
		AutoAccept:     cfg.AutoAccept,
		AutosignFile:   cfg.AutosignFile,
		AutorejectFile: cfg.AutorejectFile,
		MaxPending:     cfg.MaxPendingKeys,
		Log:            log.Named("keys"),
		OnChange:       m.keyChanged,
	})
	if err != nil {
		return nil, fmt.Errorf("open key store: %w", err)
	}
	m.newKeys = newNewKeyLimiter(cfg.NewKeysPerAddress, log.Named("newkeys"))
	m.notAcceptedLog = newLogEvery(time.Minute, 4096)

	// The job cache.
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("make cachedir: %w", err)
	}
	m.cache, err = jobcache.Open(cfg.JobCachePath(), log.Named("jobcache"))
	if err != nil {
		return nil, fmt.Errorf("open job cache: %w", err)
	}
	// From here, a failure closes the job cache.
	if err := m.newParts(); err != nil {
		m.cache.Close()
		return nil, err
	}
	return m, nil
}

// newParts builds the parts that follow the job cache.
func (m *Master) newParts() error {
	cfg, log := m.cfg, m.log
	// The event bus.
	m.bus = event.NewBus(log.Named("bus"))

	// Sessions.
	m.relays.sem = make(chan struct{}, relayAdmit)
	m.hellos = make(chan struct{}, helloSlots)
	var err error
	if m.minions, err = newRegistry(filepath.Join(cfg.CacheDir, "minions"), log.Named("minions")); err != nil {
		return err
	}
	m.pillar = newPillar(cfg, m.minions, log.Named("pillar"))
	m.pillarFor = m.pillar.For

	// Returners.
	if m.returners, err = retroute.New(retroute.Options{
		Config: cfg, MasterID: m.name, Bus: m.bus, Cache: m.cache, Log: log.Named("returners"),
	}); err != nil {
		return err
	}
	// The reactor.
	m.reactor = newReactor(cfg, m.bus, log, m.dispatchReaction)
	// Engines.
	if m.engines, err = newEngines(m); err != nil {
		return err
	}
	// The schedule.
	if m.sched, err = m.newSchedule(); err != nil {
		return err
	}
	return nil
}

// Bus is the master's event bus.
func (m *Master) Bus() *event.Bus { return m.bus }

// Blobs returns the index of the files the master serves by chunk hash:
// Add a file to put its manifest into a job.
func (m *Master) Blobs() *blobs.Index { return m.blobs }

// Fingerprint is the fingerprint of the master's key (master_finger).
func (m *Master) Fingerprint() string { return protocol.Fingerprint(m.id.Pub) }

// Ready is closed once the master listens; Addr is valid from then.
func (m *Master) Ready() <-chan struct{} { return m.ready }

// Addr is the UDP address the master listens on.
func (m *Master) Addr() net.Addr { return m.addr }

// Run listens for agents and CLIs, then starts the master's long-running
// parts by name, in the order of doc.go, until ctx is cancelled. Then it
// closes the listeners and every connection, and returns once every
// goroutine it started has exited; the event bus and the job cache are
// closed last.
func (m *Master) Run(ctx context.Context) error {
	defer m.cache.Close()
	ln, closeLn, err := m.listenQUIC()
	if err != nil {
		return err
	}
	defer closeLn()
	sock := m.cfg.SocketPath()
	apiLn, err := unixsock.Listen(sock)
	if err != nil {
		return err
	}
	defer apiLn.Close()
	m.addr = ln.Addr()
	m.log.Info("master listening", zap.Stringer("addr", m.addr), zap.String("socket", sock),
		zap.String("finger", m.Fingerprint()), zap.Int("jid_node", m.jids.Node))
	close(m.ready)

	g, gctx := errgroup.WithContext(ctx)
	// The key store has no loop: sessions and the wheel ask it.
	g.Go(func() error { return m.cleanLoop(gctx) })       // the job cache: keep_jobs
	g.Go(func() error { return m.runSessions(gctx, ln) }) // agents and relays
	g.Go(func() error { return m.returners.Run(gctx) })   // returner queues, event_return
	g.Go(func() error { return m.reactor.Run(gctx) })     // the reactor:
	g.Go(func() error { return m.engines.Run(gctx) })     // engines:
	g.Go(func() error { return m.sched.Run(gctx) })       // schedule:
	g.Go(func() error { return m.serveMetrics(gctx) })    // metrics_port
	g.Go(func() error { return m.serveAPI(gctx, apiLn) }) // the CLIs' socket
	g.Go(func() error { return m.discoveryLoop(gctx) })   // the relays' site inventories
	// Stopping: the listeners close, then every connection; Wait waits
	// for the parts, connWG for the connections' goroutines.
	g.Go(func() error {
		<-gctx.Done()
		close(m.closing)
		ln.Close()
		apiLn.Close()
		m.minions.closeAll()
		m.relays.closeAll()
		return nil
	})
	err = g.Wait()
	m.connWG.Wait()
	m.loadWG.Wait() // the reactor's last loads, committed before the cache closes
	m.bus.Close()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// listenQUIC opens the master's UDP socket and QUIC listener; closeLn
// closes both.
func (m *Master) listenQUIC() (ln *quic.Listener, closeLn func(), err error) {
	addr := net.JoinHostPort(m.cfg.Interface, strconv.Itoa(m.cfg.Port))
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	pc, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	// The stateless reset key is derived from the master's identity, so a
	// restarted master resets the connections of its previous life at
	// their next packet and agents reconnect at once instead of waiting
	// for the idle timeout.
	tr := &quic.Transport{Conn: pc, StatelessResetKey: protocol.StatelessResetKey(m.id)}
	qc := protocol.QUICConfig()
	qc.MaxIncomingStreams = maxRelayStreams + 1 // a relay link: one stream per device
	ln, err = tr.Listen(m.id.ServerTLS(), qc)
	if err != nil {
		tr.Close()
		pc.Close()
		return nil, nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, func() {
		ln.Close()
		tr.Close()
		pc.Close() // the Transport does not close a conn it was given
	}, nil
}

// cleanLoop purges jobs older than keep_jobs hours, at start and hourly.
func (m *Master) cleanLoop(ctx context.Context) error {
	if m.cfg.KeepJobs <= 0 {
		return nil
	}
	keep := time.Duration(m.cfg.KeepJobs) * time.Hour
	interval := time.Hour
	if keep < interval {
		interval = keep
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := m.cache.CleanOld(keep, m.jidClock(time.Now()))
		if err != nil {
			m.log.Warn("job cache clean", zap.Error(err))
		} else if n > 0 {
			m.log.Info("purged old jobs", zap.Int("jobs", n))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// jidClock returns t shifted so that its UTC wall clock is the wall clock
// of the master's job ids: the job cache reads times as UTC job ids, while
// the master's ids are local time unless utc_jid is set.
func (m *Master) jidClock(t time.Time) time.Time {
	if m.cfg.UTCJID {
		return t
	}
	_, offset := t.Local().Zone()
	return t.Add(time.Duration(offset) * time.Second)
}

// jidNode is the master's jid_node, or one derived from what tells masters
// apart (host name, listen address, cachedir) when the configuration sets
// none. Masters of a multimaster set should each set their own: two derived
// nodes are the same one time in a thousand.
func jidNode(cfg *config.Master) int {
	if cfg.JIDNode >= 0 {
		return cfg.JIDNode
	}
	host, _ := os.Hostname()
	h := fnv.New32a()
	fmt.Fprintf(h, "%s\x00%s\x00%s", host, cfg.ListenAddr(), cfg.CacheDir)
	return int(h.Sum32() % 1000)
}
