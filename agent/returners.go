package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/returners"

	// The light returners a masterless agent runs itself. The others
	// (redis, pgjsonb, mysql, nats, mqtt, local_cache) run on the master
	// only: they would cost the agent binary their clients, and bbolt.
	// webhook is in returners_webhook.go: Go's HTTP client costs the
	// armv7 agent about 0.7 MiB, which the default build cannot spare.
	_ "github.com/halite-fleet/halite/returners/rawfile_json"
	_ "github.com/halite-fleet/halite/returners/syslog"
)

// spoolMax bounds the returns a masterless agent keeps for one returner
// that is down.
const spoolMax = 10000

// Returners are the returners of a masterless agent's return: option, each
// fed through a Spool under cachedir/returners (append-only files, no
// bbolt) and a returners.Worker that retries a backend that is down. Make
// them with OpenReturners, deliver with Run or Drain, then Close.
type Returners struct {
	log     *zap.Logger
	id      string
	workers []*returners.Worker
	rets    []returners.Returner
}

// OpenReturners opens the returners named by cfg.Return, with their spools
// in cachedir/returners/sub (sub "" for the agent itself). A name the
// agent does not have (it has rawfile_json, syslog and webhook) is an
// error naming it.
func OpenReturners(ctx context.Context, cfg *config.Agent, sub string, log *zap.Logger) (*Returners, error) {
	rs := &Returners{log: log.Named("returners"), id: cfg.ID}
	var names []string
	for _, n := range cfg.Return {
		for _, name := range strings.Split(n, ",") {
			if name = strings.TrimSpace(name); name != "" {
				names = append(names, name)
			}
		}
	}
	dir := filepath.Join(cfg.CacheDir, "returners", sub)
	rcfg := returners.Config{Opts: cfg.Raw, Log: rs.log}
	for _, name := range names {
		if err := returners.Check(name, returners.RoleReturn); err != nil {
			rs.Close()
			return nil, fmt.Errorf("return: %w (a masterless agent runs rawfile_json, syslog and webhook itself)", err)
		}
		r, err := returners.Open(ctx, name, returners.RoleReturn, rcfg)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("return: %w", err)
		}
		rs.rets = append(rs.rets, r)
		sp, err := returners.OpenSpool(dir, name, spoolMax)
		if err != nil {
			rs.Close()
			return nil, err
		}
		reclog.Warn(rs.log, filepath.Join(dir, name+".spool"), sp.Damage)
		rs.workers = append(rs.workers, returners.NewWorker(name, sp, r, rs.log))
	}
	return rs, nil
}

// Len is how many returners there are.
func (rs *Returners) Len() int { return len(rs.workers) }

// Return spools the return of a job run here (Salt's return dict) for
// every returner; it returns once the return is on disk.
func (rs *Returners) Return(jid, fun string, args []any, res exec.Result) {
	if args == nil {
		args = []any{}
	}
	ret := map[string]any{"id": rs.id, "jid": jid, "fun": fun, "fun_args": args, "return": res.Return,
		"retcode": res.Retcode, "success": res.Success, "_stamp": event.Stamp(time.Now())}
	for _, w := range rs.workers {
		if err := w.Queue().Push(&returners.Item{Kind: returners.KindRet, Ret: ret}); err != nil {
			rs.log.Error("spool return", zap.String("returner", w.Status().Name), zap.String("jid", jid), zap.Error(err))
		}
	}
}

// Run delivers until ctx ends, retrying a backend that is down with
// backoff; it returns once every worker has stopped.
func (rs *Returners) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, w := range rs.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Run(ctx)
		}()
	}
	wg.Wait()
}

// Drain delivers until every spool is empty or ctx ends (halite-call,
// which does not stay): what is left waits in the spool for the next run.
// It reports whether everything was delivered.
func (rs *Returners) Drain(ctx context.Context) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); rs.Run(ctx) }()
	defer func() { cancel(); <-done }()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		empty := true
		for _, w := range rs.workers {
			if w.Queue().Depth() > 0 {
				empty = false
			}
		}
		if empty {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// Close closes the spools and the returners; Run must have returned.
func (rs *Returners) Close() {
	for _, w := range rs.workers {
		w.Queue().Close()
	}
	for _, r := range rs.rets {
		if err := r.Close(); err != nil {
			rs.log.Warn("close returner", zap.Error(err))
		}
	}
}
