package master

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
)

// Returns the job cache cannot store (its disk full or failing) are held:
// kept in memory, not acknowledged, and saved again every heldRetry until
// the disk takes them; then they are announced (event, returners) and
// acknowledged, once. The session stays up meanwhile: dropping it, the
// agent would come back at once and send them again into the same full
// disk (98 reconnects a minute). Acks are cumulative, so a session's ack
// stays below its oldest held return (session.ackable): its agent keeps
// that return and everything after it in its spool until then, and sends
// them again if the session ends first, the master having stored none
// twice (the cache is idempotent on jid and id). The failure is logged at
// most once per heldLogEvery, not once per return.

const (
	heldRetry    = time.Second
	heldLogEvery = 10 * time.Second
	// maxHeldBytes bounds the returns held in memory, all sessions
	// together; past it, a return not stored drops its session (the
	// agent keeps it and sends it again on its next one).
	maxHeldBytes = 64 << 20
)

// heldReturn is a return of a session not stored yet.
type heldReturn struct {
	seq  uint64 // 0: its agent predates acks
	body *protocol.ReturnBody
	enc  []byte // its CBOR as it arrived, or nil
}

func (h *heldReturn) size() int { return len(h.enc) + 256 }

// heldState is the master's part: which sessions hold returns, how many
// bytes, and the rate limit of the log.
type heldState struct {
	mu       sync.Mutex
	sessions map[*session]struct{}
	bytes    int
	lastLog  time.Time
	quiet    int  // failures since the last log line
	failing  bool // the last save failed: log when saves work again
}

// storageError reports whether err, from saving a return, is the disk's
// (the return may be stored later) rather than the return's.
func storageError(err error) bool {
	return err != nil && !errors.Is(err, jobcache.ErrBadReturn)
}

// hold keeps the return b of s (seq, enc its CBOR or nil), which the job
// cache could not store (err), for retryHeld. It returns false, holding
// nothing, when maxHeldBytes are held already.
func (m *Master) hold(s *session, seq uint64, b *protocol.ReturnBody, enc []byte, err error) bool {
	h := heldReturn{seq: seq, body: b, enc: enc}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	m.logSaveFailLocked(err)
	if m.held.bytes+h.size() > maxHeldBytes {
		return false
	}
	m.held.bytes += h.size()
	if m.held.sessions == nil {
		m.held.sessions = map[*session]struct{}{}
	}
	m.held.sessions[s] = struct{}{}
	s.heldMu.Lock()
	s.held = append(s.held, h)
	s.heldMu.Unlock()
	return true
}

// logSaveFailLocked logs a failure to store a return, at most once per
// heldLogEvery. Under m.held.mu.
func (m *Master) logSaveFailLocked(err error) {
	m.held.failing = true
	now := time.Now()
	if now.Sub(m.held.lastLog) < heldLogEvery {
		m.held.quiet++
		return
	}
	m.log.Error("job cache cannot store returns (disk full?): holding them unacknowledged, in memory, and saving them again every second",
		zap.Error(err), zap.Int("bytes_held", m.held.bytes), zap.Int("more_failures", m.held.quiet))
	m.held.lastLog, m.held.quiet = now, 0
}

// retryHeld saves the held returns every heldRetry until ctx ends.
func (m *Master) retryHeld(ctx context.Context) error {
	t := time.NewTicker(heldRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		m.saveHeld()
	}
}

// saveHeld tries once to store every held return; those stored are
// announced, and their sessions may acknowledge them. The held returns of
// a session that ended are let go: unacknowledged, they come again.
func (m *Master) saveHeld() {
	m.held.mu.Lock()
	sessions := make([]*session, 0, len(m.held.sessions))
	for s := range m.held.sessions {
		sessions = append(sessions, s)
	}
	m.held.mu.Unlock()
	stored, failed := 0, error(nil)
	for _, s := range sessions {
		s.heldMu.Lock()
		hs := s.held[:len(s.held):len(s.held)]
		s.heldMu.Unlock()
		var keep []heldReturn // of hs, those still not stored
		if !s.isClosed() {
			bodies, encs := make([]*protocol.ReturnBody, len(hs)), make([][]byte, len(hs))
			for i, h := range hs {
				bodies[i], encs[i] = h.body, h.enc
			}
			isNew, errs := m.cache.SaveReturnsNew(bodies, encs)
			for i, h := range hs {
				if errs[i] != nil {
					failed = errs[i]
					keep = append(keep, h)
					continue
				}
				stored++
				m.announceReturn(h.body, s.rets, isNew[i], nil)
			}
		}
		freed := 0
		for _, h := range hs {
			freed += h.size()
		}
		for _, h := range keep {
			freed -= h.size()
		}
		m.held.mu.Lock()
		s.heldMu.Lock()
		s.held = append(keep, s.held[len(hs):]...) // and those held since
		if len(s.held) == 0 {
			delete(m.held.sessions, s)
		}
		s.heldMu.Unlock()
		m.held.bytes -= freed
		m.held.mu.Unlock()
	}
	m.held.mu.Lock()
	defer m.held.mu.Unlock()
	if failed != nil {
		m.logSaveFailLocked(failed)
	} else if stored > 0 && m.held.failing {
		m.held.failing = false
		m.log.Info("job cache stores returns again; the held returns are stored", zap.Int("returns", stored))
	}
}

// ackable is the highest seq s may acknowledge: what it handled, but
// below its oldest held return.
func (s *session) ackable() uint64 {
	seq := s.toAck.Load()
	s.heldMu.Lock()
	for _, h := range s.held {
		if h.seq != 0 && h.seq <= seq {
			seq = h.seq - 1
		}
	}
	s.heldMu.Unlock()
	return seq
}
