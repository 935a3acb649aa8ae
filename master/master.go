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
	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/unixsock"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/schedule"
)

// Version is the master's version, sent to agents and shown by test.version.
var Version = version.Version

// services are the master's optional long-running parts (reactor,
// returners), each registered from its own file's init; each runs until ctx
// ends and returns nil then, or an error that stops the master.
var services []func(m *Master, ctx context.Context) error

// Master is a running Halite master. Make it with New, start it with Run.
type Master struct {
	cfg  *config.Master
	log  *zap.Logger
	id   *protocol.Identity
	name string // the master's id
	keys *keys.Store
	// newKeys bounds the keys of unknown ids per source (newkeys.go).
	newKeys *newKeyLimiter
	// notAcceptedLog logs a pending agent's retries once a minute
	// (logevery.go).
	notAcceptedLog *logEvery
	cache          *jobcache.Cache
	rets           *retState // returners (returners.go)
	held           heldState // returns not stored yet (held.go)
	bus            *event.Bus
	jids           event.JIDGen

	minions *registry
	relays  relays              // connected relays' links (relays.go)
	hellos  chan struct{}       // helloSlots (agents.go)
	keyWait *keyWaiters         // pending agents held (keywait.go)
	reactor masterReactor       // see reactor.go
	engines *engines.Manager    // see engines.go
	sched   *schedule.Scheduler // the master's schedule (schedule.go)
	// schedAt is where each job of the schedule was set (file:line), for
	// its errors; replaced by Reload.
	schedAt atomic.Pointer[map[string]string]

	metrics   *masterMetrics // counted for metrics_port (metrics.go)
	functions seenFunctions  // function names seen, for completion (functions.go)

	// files serves file_roots' salt:// files: one for the whole master
	// (the state compiler's, states.go).
	files *fileserver.Server

	mine      *mineStore // the agents' mine data (mine.go); see mineStore()
	localCall LocalCall  // salt.cmd's functions (runners_salt.go)
	mineOnce  sync.Once

	ready   chan struct{}
	addr    net.Addr
	closing chan struct{}

	connWG sync.WaitGroup // agent connections and API requests
}

// New opens the master's key store, identity and job cache. It does not
// listen yet.
func New(cfg *config.Master, log *zap.Logger) (*Master, error) {
	m := &Master{
		cfg:     cfg,
		log:     log,
		bus:     event.NewBus(log.Named("bus")),
		metrics: newMasterMetrics(),
		files:   fileserver.New(cfg.FileRoots),
		ready:   make(chan struct{}),
		closing: make(chan struct{}),
	}
	m.relays.sem = make(chan struct{}, relayAdmit)
	m.hellos = make(chan struct{}, helloSlots)
	m.keyWait = newKeyWaiters(maxHeldPending)
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
	m.keys, err = keys.Open(cfg.PkiDir, keys.Options{
		AutoAccept:     cfg.AutoAccept,
		AutosignFile:   cfg.AutosignFile,
		AutorejectFile: cfg.AutorejectFile,
		MaxPending:     cfg.MaxPendingKeys,
		Log:            log.Named("keys"),
		OnChange:       m.keyWait.changed,
	})
	if err != nil {
		return nil, fmt.Errorf("open key store: %w", err)
	}
	m.newKeys = newNewKeyLimiter(cfg.NewKeysPerAddress, log.Named("newkeys"))
	m.notAcceptedLog = newLogEvery(time.Minute, 4096)
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("make cachedir: %w", err)
	}
	m.cache, err = jobcache.Open(cfg.JobCachePath(), log.Named("jobcache"))
	if err != nil {
		return nil, fmt.Errorf("open job cache: %w", err)
	}
	m.minions, err = newRegistry(filepath.Join(cfg.CacheDir, "minions"), log.Named("minions"))
	if err != nil {
		m.cache.Close()
		return nil, err
	}
	if m.rets, err = newRetState(m); err != nil {
		m.cache.Close()
		return nil, err
	}
	if m.engines, err = newEngines(m); err != nil {
		m.cache.Close()
		return nil, err
	}
	if m.sched, err = m.newSchedule(); err != nil {
		m.cache.Close()
		return nil, err
	}
	return m, nil
}

// Bus is the master's event bus.
func (m *Master) Bus() *event.Bus { return m.bus }

// Fingerprint is the fingerprint of the master's key (master_finger).
func (m *Master) Fingerprint() string { return protocol.Fingerprint(m.id.Pub) }

// Ready is closed once the master listens; Addr is valid from then.
func (m *Master) Ready() <-chan struct{} { return m.ready }

// Addr is the UDP address the master listens on.
func (m *Master) Addr() net.Addr { return m.addr }

// Run listens for agents and CLIs until ctx is cancelled, then closes every
// connection and returns once every goroutine it started has exited.
func (m *Master) Run(ctx context.Context) error {
	defer m.cache.Close()
	addr := net.JoinHostPort(m.cfg.Interface, strconv.Itoa(m.cfg.Port))
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	pc, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer pc.Close() // the Transport does not close a conn it was given
	// The stateless reset key is derived from the master's identity, so a
	// restarted master resets the connections of its previous life at
	// their next packet and agents reconnect at once instead of waiting
	// for the idle timeout.
	tr := &quic.Transport{Conn: pc, StatelessResetKey: protocol.StatelessResetKey(m.id)}
	defer tr.Close()
	qc := protocol.QUICConfig()
	qc.MaxIncomingStreams = maxRelayStreams + 1 // a relay link: one stream per device
	ln, err := tr.Listen(m.id.ServerTLS(), qc)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
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
	// Several accept loops: quic-go refuses connections whose handshake
	// is done while 32 wait to be accepted, and a fleet failing over to
	// this master arrives all at once, on a busy machine.
	for range acceptLoops {
		g.Go(func() error { return m.acceptAgents(gctx, ln) })
	}
	g.Go(func() error { return m.serveAPI(gctx, apiLn) })
	g.Go(func() error { return m.cleanLoop(gctx) })
	g.Go(func() error { return m.presenceLoop(gctx) })
	g.Go(func() error { return m.ackLoop(gctx) })
	for _, svc := range services {
		g.Go(func() error { return svc(m, gctx) })
	}
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
	m.bus.Close()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
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
