package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// Multimaster, as in Salt (the master option a list):
//
//   - hot (master_type: str, the default, with more than one master): a
//     session with every master at once, each with its own outbox
//     (cachedir/spool/master-<host_port>): a job's return goes to the outbox
//     of the master that sent the job, an event to every master's outbox.
//   - failover: one session at a time, with the first master of the list
//     that answers; on its loss the next one, the list recycled once
//     exhausted; master_failback goes back to the first one once it
//     answers again. One outbox (cachedir/spool), drained by whichever
//     master is active.
//
// Liveness: master_alive_interval (failover's default 30 s) bounds both the
// QUIC idle timeout of the connection (a dead, paused or unreachable master
// is noticed within it) and the period of an application-level Ping that
// the master must answer before the next one (a master whose process
// still acknowledges packets but serves nothing is noticed within two).

// failoverAliveDefault is master_alive_interval in failover mode when the
// configuration sets none (Salt needs it set; Halite does not).
const failoverAliveDefault = 30

// link is one master of the list: its address (host:port as configured)
// and the outbox holding what is for it.
type link struct {
	addr string
	out  *outbox
	idx  int // in the list
	// tickets keeps the TLS session ticket of the link's last
	// connection, so the next one resumes (protocol/tickets.go).
	tickets protocol.SessionCache

	// Failed tries since the last session, and when the last warning
	// about them was logged, and what about (logTry); used by the link's
	// own loop only.
	fails    int
	since    time.Time
	lastWarn time.Time
	warned   string
}

// masterAddrs returns the configured masters without repeats, shuffled
// when master_shuffle or random_master is set.
func masterAddrs(cfg *config.Agent) []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range cfg.MasterAddrs() {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if cfg.MasterShuffle || cfg.RandomMaster {
		rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

// hotMode reports whether cfg connects to every master at once.
func hotMode(cfg *config.Agent, addrs []string) bool {
	return cfg.MasterType != "failover" && cfg.MasterType != "disable" && len(addrs) > 1
}

// spoolName makes addr usable as a file name: "[::1]:4506" → "__1__4506".
func spoolName(addr string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '_'
	}, addr)
}

// openLinks opens the outboxes the configured mode needs, and moves into
// them whatever an earlier configuration left in other spools (a master
// removed from a hot list, a switch between hot and failover), so that a
// configuration change loses nothing.
func openLinks(cfg *config.Agent, log *zap.Logger, keep func(spoolItem) bool) ([]*link, []*outbox, error) {
	addrs := masterAddrs(cfg)
	dirs := []string{cfg.SpoolDir()}
	if hotMode(cfg, addrs) {
		dirs = dirs[:0]
		for _, addr := range addrs {
			dirs = append(dirs, filepath.Join(cfg.SpoolDir(), "master-"+spoolName(addr)))
		}
	}
	var outs []*outbox
	err := func() error {
		for _, dir := range dirs {
			sp, err := openSpool(dir, int64(cfg.SpoolMax), keep)
			if err != nil {
				return err
			}
			reclog.Warn(log, sp.path, sp.damage)
			outs = append(outs, newOutbox(outboxMax, sp))
		}
		// Spools of another configuration: their items go to every
		// outbox (a master stores the return of a job another one sent).
		others, _ := filepath.Glob(filepath.Join(cfg.SpoolDir(), "master-*"))
	next:
		for _, dir := range append(others, cfg.SpoolDir()) {
			for _, d := range dirs {
				if d == dir {
					continue next
				}
			}
			path := filepath.Join(dir, spoolFile)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			old, err := openSpool(dir, 1<<62, keep)
			if err != nil {
				return err
			}
			reclog.Warn(log, old.path, old.damage)
			for _, it := range old.items {
				for _, o := range outs {
					if _, _, err = o.spool.push(it.kind, it.body); err != nil {
						break
					}
				}
			}
			if cerr := old.close(); err == nil {
				err = cerr
			}
			if err == nil {
				err = os.Remove(path)
			}
			if err != nil {
				return fmt.Errorf("move spool %s: %w", path, err)
			}
			os.Remove(dir) // a master-* directory, now empty
			log.Info("moved the spool of an earlier master configuration", zap.String("from", path), zap.Int("items", len(old.items)))
		}
		return nil
	}()
	if err != nil {
		for _, o := range outs {
			o.spool.close()
		}
		return nil, nil, err
	}
	links := make([]*link, len(addrs))
	for i, addr := range addrs {
		links[i] = &link{addr: addr, out: outs[min(i, len(outs)-1)], idx: i}
	}
	return links, outs, nil
}

// connectLoop keeps the agent connected to its masters, as the
// configuration says: one master, every master (hot), or one at a time
// (failover).
func (a *Agent) connectLoop(ctx context.Context) error {
	switch {
	case a.cfg.MasterType == "failover":
		return a.failoverLoop(ctx)
	case len(a.links) > 1:
		g, gctx := errgroup.WithContext(ctx)
		for _, l := range a.links {
			g.Go(func() error { return a.keepLink(gctx, l) })
		}
		return g.Wait()
	default:
		return a.keepLink(ctx, a.links[0])
	}
}

const maxBackoff = 30 * time.Second

// retryPolicy is how long to wait before the next try after a failure.
type retryPolicy struct {
	cfg        *config.Agent
	backoff    time.Duration
	acceptWait time.Duration
}

func newRetryPolicy(cfg *config.Agent) *retryPolicy {
	p := &retryPolicy{cfg: cfg}
	p.reset()
	return p
}

func (p *retryPolicy) reset() {
	p.backoff = time.Second
	p.acceptWait = time.Duration(p.cfg.AcceptanceWaitTime) * time.Second
	if p.acceptWait <= 0 {
		p.acceptWait = 10 * time.Second
	}
}

// wait returns the pause after err; established says whether the session
// that ended had been accepted (then the master went away: a fleet should
// not come back all at once, so the first pause is random within
// random_reauth_delay).
func (p *retryPolicy) wait(err error, established bool) time.Duration {
	var na *errNotAccepted
	var pe *pinError
	var de *dnsError
	switch {
	case established:
		p.reset()
		if d := p.cfg.RandomReauthDelay; d > 0 {
			return time.Duration(rand.Int64N(int64(d)*int64(time.Second))) + 100*time.Millisecond
		}
		return jitter(p.backoff)
	case errors.As(err, &pe):
		return jitter(maxBackoff)
	case errors.As(err, &na):
		w := p.acceptWait
		if max := time.Duration(p.cfg.AcceptanceWaitTimeMax) * time.Second; max > p.acceptWait {
			p.acceptWait += time.Duration(p.cfg.AcceptanceWaitTime) * time.Second
			p.acceptWait = min(p.acceptWait, max)
		}
		if na.held {
			// The wait was spent on the connection: only its rest is left.
			return na.rest
		}
		return jitter(w)
	case errors.As(err, &de) && p.cfg.RetryDNS > 0:
		return time.Duration(p.cfg.RetryDNS) * time.Second
	}
	w := p.backoff
	p.backoff = min(2*p.backoff, maxBackoff)
	return jitter(w)
}

// jitter is full jitter with a floor of 100 ms.
func jitter(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(d))) + 100*time.Millisecond
}

// sleep waits d or until ctx ends, reporting whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// triesWarnEvery is how often a master that stays unreachable is
// reported at warning level (between, at info). Salt logs an error at each
// failed try ("Error while bringing up minion for multi-master. Is master
// at %s responding?", salt/minion.py _connect_minion), every
// acceptance_wait_time, and once, after 60 s, "Minion unable to
// successfully connect to a Salt Master." (_check_minions): Halite warns at
// the first failure and then once a minute, with the address and reason.
const triesWarnEvery = time.Minute

// logTry logs why a try to reach a master failed: loudly for a key that
// is not the pinned one (an attack, or a master re-keyed by hand); at
// warning level for the first failure (of each kind: unreachable, key
// pending) and then every triesWarnEvery, else at info.
func (a *Agent) logTry(l *link, err error) {
	now := time.Now()
	if l.fails == 0 {
		l.since = now
	}
	l.fails++
	var na *errNotAccepted
	var pe *pinError
	lvl, msg := zap.InfoLevel, "cannot reach master"
	if errors.As(err, &na) {
		msg = "waiting for the master to accept this agent's key"
	}
	if now.Sub(l.lastWarn) >= triesWarnEvery || msg != l.warned {
		lvl, l.lastWarn, l.warned = zap.WarnLevel, now, msg
	}
	if errors.As(err, &pe) {
		lvl, msg = zap.ErrorLevel, "refusing master: its key is not the pinned one"
	}
	if ce := a.log.Check(lvl, msg); ce != nil {
		ce.Write(zap.String("master", l.addr), zap.Error(err), zap.Int("tries", l.fails),
			zap.Duration("for", now.Sub(l.since).Round(time.Second)), zap.String("finger", a.Fingerprint()))
	}
}

// linkUp resets l's failure count once a session is established, so that
// the next failure warns at once.
func linkUp(l *link) { l.fails, l.lastWarn, l.warned = 0, time.Time{}, "" }

// keepLink keeps a session with one master until ctx ends, reconnecting
// after every loss.
func (a *Agent) keepLink(ctx context.Context, l *link) error {
	p := newRetryPolicy(a.cfg)
	for {
		c, err := a.dial(ctx, l, p.acceptWait)
		established := err == nil
		if established {
			linkUp(l)
			err = a.serve(ctx, c, nil)
		}
		if ctx.Err() != nil {
			return nil
		}
		if established {
			a.log.Info("master connection ended", zap.String("master", l.addr), zap.Error(err))
		} else {
			a.logTry(l, err)
		}
		if !sleep(ctx, p.wait(err, established)) {
			return nil
		}
	}
}

// failoverLoop keeps one session, with the first master of the list that
// answers; on its loss it tries the next one at once.
func (a *Agent) failoverLoop(ctx context.Context) error {
	p := newRetryPolicy(a.cfg)
	n := len(a.links)
	from := 0
	for {
		var c *masterConn
		var lastErr error
		idx := from
		for k := 0; k < n && c == nil; k++ {
			idx = (from + k) % n
			// A master that refuses a connection is up but busy (a fleet
			// failing over to it at once): it is tried again after a
			// short random pause before the next master, which may be
			// the dead one.
			for try := 0; ; try++ {
				var err error
				// No wait on a master that holds the key pending:
				// the next master of the list is tried at once.
				c, err = a.dial(ctx, a.links[idx], 0)
				if ctx.Err() != nil {
					return nil
				}
				if err == nil {
					break
				}
				lastErr = err
				a.logTry(a.links[idx], err)
				var te *quic.TransportError
				if !errors.As(err, &te) || te.ErrorCode != quic.ConnectionRefused || try == 4 || !sleep(ctx, jitter(time.Second)) {
					break
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if c == nil {
			w := p.wait(lastErr, false)
			a.log.Warn("no master of the list answered; trying the list again", zap.Int("masters", n), zap.Duration("in", w))
			if !sleep(ctx, w) {
				return nil
			}
			from = 0
			continue
		}
		p.reset()
		linkUp(c.l)
		for c != nil {
			idx = c.l.idx
			var back *masterConn
			err := a.serve(ctx, c, func(sctx context.Context) *masterConn {
				if !a.cfg.MasterFailback || idx == 0 {
					return nil
				}
				return a.failbackWatch(sctx)
			})
			if ctx.Err() != nil {
				if c.next != nil {
					c.next.conn.CloseWithError(0, "")
				}
				return nil
			}
			back = c.next
			if back != nil {
				a.log.Info("failing back to the first master", zap.String("master", back.l.addr), zap.String("from", c.l.addr))
				a.bus.Publish("__master_failback", map[string]any{"master": back.l.addr, "from": c.l.addr})
				c = back
				continue
			}
			a.log.Warn("lost the master; failing over to the next one", zap.String("master", c.l.addr), zap.Error(err))
			c = nil
		}
		from = (idx + 1) % n
	}
}

// failbackWatch tries the first master every master_failback_interval
// (default master_alive_interval, then 30 s) until it accepts a session
// or ctx ends.
func (a *Agent) failbackWatch(ctx context.Context) *masterConn {
	every := time.Duration(a.cfg.MasterFailbackInterval) * time.Second
	if every <= 0 {
		every = a.aliveInterval()
	}
	if every <= 0 {
		every = failoverAliveDefault * time.Second
	}
	for {
		if !sleep(ctx, every) {
			return nil
		}
		c, err := a.dial(ctx, a.links[0], 0)
		if err == nil {
			return c
		}
		if ce := a.log.Check(zap.DebugLevel, "first master still away"); ce != nil {
			ce.Write(zap.String("master", a.links[0].addr), zap.Error(err))
		}
	}
}

// aliveInterval is master_alive_interval (0: none), with failover's default.
func (a *Agent) aliveInterval() time.Duration {
	s := a.cfg.MasterAliveInterval
	if s <= 0 && a.cfg.MasterType == "failover" {
		s = failoverAliveDefault
	}
	return time.Duration(s) * time.Second
}

// dnsError is a master name that does not resolve.
type dnsError struct {
	host string
	err  error
}

func (e *dnsError) Error() string { return fmt.Sprintf("resolve master %s: %v", e.host, e.err) }
func (e *dnsError) Unwrap() error { return e.err }

// resolve looks the master's name up again on every try (retry_dns), so a
// master that moved is found at its new address.
func resolve(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("master address %q: %w", addr, err)
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(rctx, host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return "", &dnsError{host: host, err: err}
	}
	return net.JoinHostPort(ips[0], port), nil
}

// Subscribe subscribes to the agent's local event bus (Salt's minion
// events: __master_connected, __master_disconnected, __master_failback,
// and what the agent fires itself), for tools and tests that watch an
// agent in their own process.
func (a *Agent) Subscribe(pattern string, queue int) *event.Subscription {
	return a.bus.Subscribe(pattern, queue)
}
