package master

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// New keys: a Hello under an id the key store does not know writes a key
// file (to minions_pre, or minions with auto_accept). Anyone who can reach
// the master's port may send one, so the master bounds them: at most
// new_keys_per_address a minute from one source address (a token bucket
// holding as many), and at most max_pending_keys pending keys in all (the
// key store's cap). A Hello over either bound is refused with a typed error
// (protocol.KindRateLimited, protocol.KindPendingFull) and no salt/auth
// event; the agent tries again later. Refusals are counted and logged once
// per refusalLogInterval, not once each.

// refusalLogInterval is how often, at most, refused new keys are logged.
const refusalLogInterval = time.Minute

// newKeyLimiter admits the keys of ids the master does not know. Its
// methods are safe for concurrent use.
type newKeyLimiter struct {
	perMin int // new keys a minute per source; 0: no limit
	log    *zap.Logger
	now    func() time.Time

	mu      sync.Mutex
	buckets map[netip.Prefix]*keyBucket
	swept   time.Time
	// Refusals since the last log, by kind, and the last refused source.
	counts   map[protocol.Kind]int
	lastFrom string
	nextLog  time.Time
	total    int // refusals since start
}

// keyBucket is a token bucket: tokens at time at.
type keyBucket struct {
	tokens float64
	at     time.Time
}

func newNewKeyLimiter(perMin int, log *zap.Logger) *newKeyLimiter {
	return &newKeyLimiter{
		perMin:  perMin,
		log:     log,
		now:     time.Now,
		buckets: make(map[netip.Prefix]*keyBucket),
		counts:  make(map[protocol.Kind]int),
	}
}

// source is the key of addr's bucket: an IPv4 address, or the /64 of an
// IPv6 one (a host is commonly given a whole /64). ok is false for an
// address that is not IP.
func source(addr net.Addr) (netip.Prefix, bool) {
	u, ok := addr.(*net.UDPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	a := u.AddrPort().Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, err := a.Prefix(bits)
	return p, err == nil
}

// allow takes a token of addr's bucket, reporting whether there was one.
func (l *newKeyLimiter) allow(addr net.Addr) bool {
	if l.perMin <= 0 {
		return true
	}
	src, ok := source(addr)
	if !ok {
		return true
	}
	now := l.now()
	rate := float64(l.perMin) / float64(time.Minute) // tokens a nanosecond
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now, rate)
	b := l.buckets[src]
	if b == nil {
		b = &keyBucket{tokens: float64(l.perMin), at: now}
		l.buckets[src] = b
	}
	b.tokens = min(float64(l.perMin), b.tokens+rate*float64(now.Sub(b.at)))
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// sweep forgets, once a minute, the buckets that have filled up again: a
// source seen once costs memory for a minute at most. l.mu is held.
func (l *newKeyLimiter) sweep(now time.Time, rate float64) {
	if now.Sub(l.swept) < time.Minute {
		return
	}
	l.swept = now
	for src, b := range l.buckets {
		if b.tokens+rate*float64(now.Sub(b.at)) >= float64(l.perMin) {
			delete(l.buckets, src)
		}
	}
}

// refused counts a refused new key of kind k from addr, and logs the
// refusals counted so far if none were logged in the last interval.
func (l *newKeyLimiter) refused(k protocol.Kind, addr net.Addr, id string) {
	now := l.now()
	l.mu.Lock()
	l.counts[k]++
	l.total++
	l.lastFrom = addr.String()
	if now.Before(l.nextLog) {
		l.mu.Unlock()
		if ce := l.log.Check(zap.DebugLevel, "new key refused"); ce != nil {
			ce.Write(zap.Stringer("kind", k), zap.String("remote", addr.String()), zap.String("id", id))
		}
		return
	}
	rate, full, total, from := l.counts[protocol.KindRateLimited], l.counts[protocol.KindPendingFull], l.total, l.lastFrom
	clear(l.counts)
	l.nextLog = now.Add(refusalLogInterval)
	l.mu.Unlock()
	l.log.Warn("refusing new keys: too many from one address (new_keys_per_address) or too many pending (max_pending_keys); counts since the last such message",
		zap.Int("rate_limited", rate), zap.Int("pending_full", full), zap.Int("total", total),
		zap.String("last_remote", from), zap.String("last_id", id))
}
