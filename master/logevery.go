package master

import (
	"sync"
	"time"
)

// logEvery says whether something about a key (an agent id) is worth
// logging now: yes once per key per interval. A pending agent retries
// every acceptance_wait_time (seconds) for as long as nobody accepts it;
// logging each retry fills the master's log. It remembers at most max
// keys: when full, it forgets those logged more than an interval ago,
// and if none were, all of them (more lines, never unbounded memory, when
// a flood of hostile ids comes).
type logEvery struct {
	interval time.Duration
	max      int

	mu   sync.Mutex
	last map[string]time.Time
}

func newLogEvery(interval time.Duration, max int) *logEvery {
	return &logEvery{interval: interval, max: max, last: map[string]time.Time{}}
}

// Allow reports whether to log about key now, and if so notes it.
func (l *logEvery) Allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.interval {
		return false
	}
	if len(l.last) >= l.max {
		for k, t := range l.last {
			if now.Sub(t) >= l.interval {
				delete(l.last, k)
			}
		}
		if len(l.last) >= l.max {
			clear(l.last)
		}
	}
	l.last[key] = now
	return true
}
