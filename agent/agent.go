package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/agent/beacons"
	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/agent/ota"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/schedule"
)

// Version is the agent's version (internal/version: the Makefile stamps it).
var Version = version.Version

// outboxMax bounds the messages other than returns and events (pongs,
// grains) waiting for the master; returns and events wait in the spool,
// bounded by spool_max bytes.
const outboxMax = 10000

// Agent is a running halite-agent. Make it with New, start it with Run.
type Agent struct {
	cfg    *config.Agent
	log    *zap.Logger
	id     *protocol.Identity
	grains *grains.Store
	exec   *exec.Executor
	bus    *event.Bus
	out    *outbox   // the first master's outbox (the only one but in hot mode)
	outs   []*outbox // every outbox, each once
	links  []*link   // the masters, in the order they are tried

	masterPub atomic.Pointer[ed25519.PublicKey] // the master's key, once pinned
	pinMu     sync.Mutex                        // one pin check (and first-use record) at a time
	nconn     atomic.Int32                      // sessions up

	jobs *jobLog // the jobs taken, so that none runs twice (joblog.go)

	jobWG sync.WaitGroup

	rets *Returners // a masterless agent's own returners; nil: none

	beacons *beacons.Manager // beacons_funcs.go
	engines *engineHost      // engines.go

	sched     *schedule.Scheduler               // schedule_funcs.go
	schedAt   atomic.Pointer[map[string]string] // where each job was configured
	schedRets schedReturners                    // the returners of jobs' returner:
	jids      event.JIDGen                      // the jids of scheduled jobs
	mine      mineState                         // mine.go
	stcall    stateCallState                    // statecall.go
	ota       otaState                          // firmware.go
	blob      blobState                         // blobs.go
	pillar    pillarState                       // pillar.go
	fq        fileQueryState                    // files.go
}

// New loads (or makes) the agent's identity, opens its outbox spool
// (cachedir/spool; Run closes it) and collects its grains.
func New(cfg *config.Agent, log *zap.Logger) (*Agent, error) {
	if err := protocol.ValidID(cfg.ID); err != nil {
		return nil, fmt.Errorf("agent id: %w", err)
	}
	id, created, err := protocol.LoadOrCreateIdentity(cfg.PkiDir, "minion")
	if err != nil {
		return nil, fmt.Errorf("agent identity: %w", err)
	}
	if created {
		log.Info("made a new agent key", zap.String("pki_dir", cfg.PkiDir), zap.String("finger", protocol.Fingerprint(id.Pub)))
	}
	links, outs, err := openLinks(cfg, log, func(it spoolItem) bool {
		if !protocol.MadeBy(it.body, cfg.ID) {
			log.Warn("outbox item made under another agent id; dropped", zap.Uint64("seq", it.seq))
			return false
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if n := o.spool.len(); n > 0 {
			log.Info("outbox holds returns and events for the master", zap.String("spool", o.spool.path), zap.Int("items", n))
		}
	}
	a := &Agent{
		cfg:   cfg,
		log:   log,
		id:    id,
		bus:   event.NewBus(log.Named("bus")),
		out:   outs[0],
		outs:  outs,
		links: links,
	}
	closeSpools := func() {
		for _, o := range outs {
			o.spool.close()
		}
	}
	if a.jobs, err = openJobLog(cfg.CacheDir, time.Duration(cfg.JobReplayWindow)*time.Second); err != nil {
		closeSpools()
		return nil, err
	}
	a.initOTA()
	a.grains = grains.NewFile(cfg.ID, buildGrains(cfg.Grains), cfg.GrainsFile(), log.Named("grains"))
	a.exec = exec.New(exec.Options{
		ID: cfg.ID, Version: Version, Grains: a.grains, Log: log.Named("exec"), Opts: cfg.Opts(),
		OnGrainsRefresh: func(g map[string]any) {
			for _, o := range a.outs {
				o.push(&protocol.Grains{Grains: g})
			}
		},
		Pillar: a.Pillar, FetchPillar: a.FreshPillar, RefreshPillar: a.RefreshPillar,
		Files: a.Files(),
		Host:  a,
	})
	if a.beacons, err = a.newBeacons(); err == nil {
		a.engines, err = a.newEngines()
	}
	if err == nil {
		a.sched, err = a.newSchedule()
	}
	if err == nil {
		err = a.checkMine()
	}
	if err != nil {
		closeSpools()
		a.jobs.close()
		return nil, err
	}
	a.reportKilled()
	return a, nil
}

// Fingerprint is the fingerprint of the agent's key.
func (a *Agent) Fingerprint() string { return protocol.Fingerprint(a.id.Pub) }

// Run connects to the master and serves jobs until ctx is cancelled; it
// returns once every goroutine it started, running jobs included, exited.
func (a *Agent) Run(ctx context.Context) error {
	ln, err := listenUnix(a.cfg.SocketPath())
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx) // stopRun: an update hands over
	defer stop()
	a.ota.mu.Lock()
	a.ota.stop = stop
	a.ota.mu.Unlock()
	a.settleUpdate()
	g, gctx := errgroup.WithContext(ctx)
	a.pillar.mu.Lock()
	a.pillar.ctx = gctx
	a.pillar.mu.Unlock()
	g.Go(func() error { return a.serveLocal(gctx, ln) })
	for _, o := range a.outs {
		g.Go(func() error { return o.spool.syncLoop(gctx) })
	}
	g.Go(func() error { return a.jobs.syncLoop(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		ln.Close()
		return nil
	})
	if a.cfg.MasterType != "disable" && len(a.links) > 0 {
		g.Go(func() error { return a.connectLoop(gctx) })
	} else {
		a.log.Info("running masterless")
	}
	if a.masterless() && len(a.cfg.Return) > 0 {
		rets, err := OpenReturners(ctx, a.cfg, "", a.log)
		if err != nil {
			a.log.Error("return option ignored", zap.Error(err))
		} else {
			a.rets = rets
			defer rets.Close()
			g.Go(func() error { rets.Run(gctx); return nil })
		}
	}
	if a.masterless() && len(a.cfg.Reactor) > 0 {
		g.Go(func() error { return a.runReactor(gctx) })
	}
	g.Go(func() error { return a.beacons.Run(gctx) })
	g.Go(func() error { return a.engines.Run(gctx) })
	g.Go(func() error { return a.sched.Run(gctx) })
	err = g.Wait()
	a.jobWG.Wait()
	a.schedRets.close()
	a.bus.Close()
	for _, o := range a.outs {
		if cerr := o.spool.close(); cerr != nil {
			a.log.Warn("close outbox", zap.Error(cerr))
		}
	}
	if cerr := a.jobs.close(); cerr != nil {
		a.log.Warn("close job log", zap.Error(cerr))
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// buildGrains are the static grains with the agent's build added
// (firmware.go) unless the configuration sets them.
func buildGrains(static map[string]any) map[string]any {
	g := make(map[string]any, len(static)+2)
	g[grainPlatform] = ota.Platform()
	g[grainVersion] = Version
	for k, v := range static {
		g[k] = v
	}
	return g
}

// errNotAccepted is a session's end when the master has not accepted our
// key. held says the master held the connection while the key was pending
// (awaitDecision), rest how much of the wait was not spent: the next try
// waits only that.
type errNotAccepted struct {
	status string
	held   bool
	rest   time.Duration
}

func (e *errNotAccepted) Error() string { return "key " + e.status + " by the master" }

// pinError is a master key that does not match the pinned one.
type pinError struct{ msg string }

func (e *pinError) Error() string { return e.msg }

func (a *Agent) pinFail(msg string) error { return &pinError{msg} }

// pin checks the master's key against master_finger, or against the key
// recorded on first use (pki_dir/minion_master.pub), recording it if none is.
func (a *Agent) pin(pub ed25519.PublicKey) error {
	a.pinMu.Lock()
	defer a.pinMu.Unlock()
	fp := protocol.Fingerprint(pub)
	if a.cfg.MasterFinger != "" && !protocol.SameFingerprint(a.cfg.MasterFinger, fp) {
		return a.pinFail(fmt.Sprintf("master key fingerprint %s does not match master_finger %s", fp, a.cfg.MasterFinger))
	}
	path := filepath.Join(a.cfg.PkiDir, protocol.MasterPinFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		old, perr := protocol.ParsePublicKey(b)
		if perr != nil {
			return a.pinFail(fmt.Sprintf("pinned master key %s is unreadable: %v", path, perr))
		}
		if !old.Equal(pub) {
			hint := "if the master was re-keyed on purpose, remove that file"
			if len(a.links) > 1 {
				hint = "masters of a multimaster set must share one key (copy master.pem and master.pub); " + hint
			}
			return a.pinFail(fmt.Sprintf("master key changed: it is now %s, pinned %s in %s; %s", fp, protocol.Fingerprint(old), path, hint))
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(path, protocol.EncodePublicKey(pub), 0o644); err != nil {
			return fmt.Errorf("record master key: %w", err)
		}
		a.log.Info("pinned the master's key on first use", zap.String("finger", fp), zap.String("file", path))
	default:
		return fmt.Errorf("read pinned master key: %w", err)
	}
	p := append(ed25519.PublicKey(nil), pub...)
	a.masterPub.Store(&p)
	return nil
}
