package event

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halite-fleet/halite/targets"
	"go.uber.org/zap"
)

// DefaultQueue is the queue length a subscription gets when it asks for
// zero or less.
const DefaultQueue = 1024

// dropWarnInterval is the least time between two "events dropped" warnings
// for one subscription.
const dropWarnInterval = time.Second

// Event is one event on the bus: a tag and its data. Data is shared between
// the publisher and every subscriber that receives it, so nobody may modify
// it once it is published.
type Event struct {
	Tag  string
	Data map[string]any
}

// Stats counts what a Bus has done since it was made.
type Stats struct {
	Published   uint64 // calls to Publish
	Dropped     uint64 // deliveries lost to full subscriber queues
	Subscribers int    // open subscriptions
}

// Bus delivers published events to every subscription whose pattern matches
// the tag. It is safe for concurrent use; the zero value is not usable, use
// NewBus.
type Bus struct {
	log *zap.Logger

	mu     sync.Mutex                      // serialises changes to subs
	subs   atomic.Pointer[[]*Subscription] // copy on write, read by Publish
	closed bool

	published atomic.Uint64
	dropped   atomic.Uint64
}

// NewBus returns an empty bus that logs dropped events to log.
func NewBus(log *zap.Logger) *Bus {
	if log == nil {
		log = zap.NewNop()
	}
	b := &Bus{log: log}
	b.subs.Store(&[]*Subscription{})
	return b
}

// Publish sends an event to every matching subscription without blocking.
// If data has no "_stamp" key, Publish sets it to Stamp(time.Now()), as Salt
// does; a nil data becomes a new map holding only the stamp. The map is
// shared with the subscribers and must not be modified afterwards.
func (b *Bus) Publish(tag string, data map[string]any) {
	if data == nil {
		data = make(map[string]any, 1)
	}
	if _, ok := data["_stamp"]; !ok {
		data["_stamp"] = Stamp(time.Now())
	}
	b.published.Add(1)
	ev := Event{Tag: tag, Data: data}
	for _, s := range *b.subs.Load() {
		if s.match(tag) {
			s.deliver(ev)
		}
	}
}

// Subscribe returns a subscription to the events whose tag matches pattern,
// a shell glob with the semantics of targets.MatchGlob ('*' crosses '/').
// The empty pattern and "*" match every tag. queue bounds the events waiting
// to be read; zero or less means DefaultQueue. Subscribing to a closed bus
// returns a subscription that is already closed.
func (b *Bus) Subscribe(pattern string, queue int) *Subscription {
	var m func(string) bool
	switch {
	case pattern == "" || pattern == "*":
		m = matchAll
	case !targets.HasGlobMeta(pattern):
		m = func(tag string) bool { return tag == pattern }
	default:
		m = func(tag string) bool { return targets.MatchGlob(pattern, tag) }
	}
	return b.add("fnmatch:"+pattern, m, queue)
}

// SubscribePrefix returns a subscription to the events whose tag starts with
// prefix (Salt's default get_event match, "startswith"). The empty prefix
// matches every tag. queue is as for Subscribe.
func (b *Bus) SubscribePrefix(prefix string, queue int) *Subscription {
	m := matchAll
	if prefix != "" {
		m = func(tag string) bool { return strings.HasPrefix(tag, prefix) }
	}
	return b.add("startswith:"+prefix, m, queue)
}

func matchAll(string) bool { return true }

func (b *Bus) add(pattern string, m func(string) bool, queue int) *Subscription {
	if queue <= 0 {
		queue = DefaultQueue
	}
	s := &Subscription{bus: b, pattern: pattern, match: m, ch: make(chan Event, queue)}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.closed = true
		close(s.ch)
		return s
	}
	old := *b.subs.Load()
	subs := make([]*Subscription, len(old), len(old)+1)
	copy(subs, old)
	subs = append(subs, s)
	b.subs.Store(&subs)
	return s
}

func (b *Bus) remove(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.subs.Load()
	subs := make([]*Subscription, 0, len(old))
	for _, o := range old {
		if o != s {
			subs = append(subs, o)
		}
	}
	b.subs.Store(&subs)
}

// Stats returns the bus's counters.
func (b *Bus) Stats() Stats {
	return Stats{
		Published:   b.published.Load(),
		Dropped:     b.dropped.Load(),
		Subscribers: len(*b.subs.Load()),
	}
}

// Close closes every subscription, so that readers ranging over C() finish,
// and makes later subscriptions start closed. Publish still counts events
// after Close but delivers them to nobody. Close is idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	subs := *b.subs.Load()
	b.subs.Store(&[]*Subscription{})
	b.mu.Unlock()
	for _, s := range subs {
		s.closeChan()
	}
}

// Subscription is one subscriber's bounded queue of events.
type Subscription struct {
	bus     *Bus
	pattern string // match type and pattern, for logs
	match   func(tag string) bool

	mu     sync.RWMutex // read-held while sending on ch, write-held to close it
	closed bool
	ch     chan Event

	dropped  atomic.Uint64
	lastWarn atomic.Int64  // unix nanoseconds of the last drop warning
	warned   atomic.Uint64 // dropped count at the last warning
}

// C returns the channel the subscription's events arrive on. It is closed by
// Close (of the subscription or of the bus).
func (s *Subscription) C() <-chan Event { return s.ch }

// Dropped returns how many events this subscription lost because its queue
// was full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes and closes C(). Events already queued stay readable.
// It is idempotent and safe to call concurrently with Publish.
func (s *Subscription) Close() {
	s.bus.remove(s)
	s.closeChan()
}

func (s *Subscription) closeChan() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.ch)
	}
}

func (s *Subscription) deliver(ev Event) {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return
	}
	select {
	case s.ch <- ev:
		s.mu.RUnlock()
		return
	default:
	}
	s.mu.RUnlock()
	n := s.dropped.Add(1)
	s.bus.dropped.Add(1)
	s.warnDropped(ev.Tag, n)
}

// warnDropped logs at most one warning per dropWarnInterval per
// subscription, with the number of events lost since the previous one.
func (s *Subscription) warnDropped(tag string, total uint64) {
	now := time.Now().UnixNano()
	last := s.lastWarn.Load()
	if last != 0 && now-last < int64(dropWarnInterval) {
		return
	}
	if !s.lastWarn.CompareAndSwap(last, now) {
		return
	}
	prev := s.warned.Swap(total)
	if prev > total {
		prev = total
	}
	s.bus.log.Warn("event subscriber too slow, events dropped",
		zap.String("pattern", s.pattern),
		zap.Int("queue", cap(s.ch)),
		zap.String("tag", tag),
		zap.Uint64("dropped", total-prev),
		zap.Uint64("dropped_total", total))
}
