package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// spoolFile is the outbox's log under cachedir/spool.
const spoolFile = "outbox.log"

// maxBody bounds the body of one record of the log when it is read back:
// a length past it is a corrupt file, not an allocation to attempt.
const maxBody = protocol.DefaultMaxFrame + 1024

// compactGarbage is how many bytes of records that no longer matter the
// log may hold before it is rewritten (and then only if they outweigh
// what waits).
const compactGarbage = 1 << 20

// Record kinds of the log.
const (
	recReturn = 'r' // a return body waits
	recEvent  = 'e' // an event body waits
	recTrim   = 't' // every item up to seq is gone (acked or dropped)
)

// spoolItem is a return or an event waiting for the master's ack: its
// unsigned CBOR body, tagged by the session that sends it.
type spoolItem struct {
	seq  uint64
	kind protocol.Type // TypeReturn or TypeEvent
	body []byte
}

// spool is the durable part of the outbox: an append-only log of the
// returns and events not yet acknowledged, bounded by the bytes of their
// bodies (past max, the oldest are dropped). Each item gets the next
// sequence number; acks and drops always remove a prefix, so one "trim up
// to seq" record says both. A push is written to the log (the kernel's
// page cache) before it returns, so it survives the agent's death at once;
// syncLoop makes it durable against power loss within syncInterval, without
// making each return wait for the flash (100 agents fsyncing every return
// on one disk tripled a fleet-wide test.ping). Trims are not synced, so a
// crash may deliver an item again (at least once). What waits is also
// held in memory: it is at most max bytes.
//
// A write that fails (a full disk) is cut off the log, back to its last
// whole record, so that nothing written later sits behind a torn record;
// the push reports the failure. Damage found on open (a torn last record
// after a crash, a flipped bit, a zeroed page) is dropped, the rest kept:
// reclog.Scan resynchronises on the next intact record, and openSpool
// reports the ranges dropped (damage). A damaged item is lost (if not yet
// acknowledged) and a damaged trim record undone (its items are sent
// again, unless a later trim covers them), but nothing after the damage
// is lost or sent again.
type spool struct {
	path string
	max  int64

	mu      sync.Mutex
	f       *os.File
	items   []spoolItem // ascending seq
	bytes   int64       // of the items' bodies
	next    uint64      // seq of the next push
	trimmed uint64      // every seq up to it is gone
	garbage int64       // bytes of the log that no longer matter
	dirty   bool        // written since the last fsync
	size    int64       // end of the log's last whole record

	damage []reclog.Damage // ranges of the log dropped as damaged when it was opened
}

// syncInterval bounds how long a pushed item may sit in the page cache
// before it is fsynced.
const syncInterval = 100 * time.Millisecond

// syncLoop fsyncs the log, at most every syncInterval, when something was
// pushed since the last sync and is still waiting for its ack, until ctx
// ends (close syncs the rest).
func (s *spool) syncLoop(ctx context.Context) error {
	return syncLoop(ctx, "outbox spool "+s.path, func() *os.File {
		// What the master acked already needs no fsync: in the common
		// case a return is acked within milliseconds and never costs the
		// device's flash a sync at all.
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.dirty || len(s.items) == 0 {
			return nil
		}
		s.dirty = false
		return s.f
	})
}

// syncLoop fsyncs the file next returns (nil: none needs it) every
// syncInterval until ctx ends; what names it in errors.
func syncLoop(ctx context.Context, what string, next func() *os.File) error {
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if f := next(); f != nil {
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				return fmt.Errorf("sync %s: %w", what, err)
			}
		}
	}
}

// openSpool opens or creates dir/outbox.log. keep, if not nil, is asked
// about every item found waiting; items it refuses are forgotten (an item
// made under another agent id would never be accepted).
func openSpool(dir string, max int64, keep func(spoolItem) bool) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open outbox spool %s: %w", dir, err)
	}
	s := &spool{path: filepath.Join(dir, spoolFile), max: max, next: 1}
	if err := s.load(keep); err != nil {
		return nil, fmt.Errorf("open outbox spool %s: %w", s.path, err)
	}
	if err := s.compact(); err != nil {
		// A full disk, say: go on with the log as it is, past its last
		// whole record cut off (that frees room; should it fail, the next
		// load finds what is appended past the damage).
		if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("open outbox spool %s: %w", s.path, err)
		}
		s.f.Truncate(s.size)
	}
	return s, nil
}

// load reads the log, past damage (see spool). A record found past damage
// must be one the log could hold there: each record skipped took at
// least reclog.HeaderSize bytes and at most one seq, so its seq is at most
// that many past what was read before it (a record found inside the body
// of a damaged one, written there by whoever sent the event, cannot jump
// the sequence and so trim or shadow what follows).
func (s *spool) load(keep func(spoolItem) bool) error {
	b, err := os.ReadFile(s.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	end, damage := reclog.Scan(b, maxBody, func(_, _ int, rec reclog.Record, skipped int) bool {
		if rec.Kind != recTrim && rec.Kind != recReturn && rec.Kind != recEvent {
			return false
		}
		seq := rec.Seq
		if skipped > 0 && s.next > 1 {
			last := s.next - 1 + uint64(skipped/reclog.HeaderSize) // the highest seq skipped
			if rec.Kind == recTrim && seq > last || seq > last+1 {
				return false
			}
		}
		if rec.Kind == recTrim {
			s.trimLocked(seq)
		} else if seq > s.trimmed && (len(s.items) == 0 || seq > s.items[len(s.items)-1].seq) {
			it := spoolItem{seq: seq, kind: protocol.TypeEvent, body: rec.Body}
			if rec.Kind == recReturn {
				it.kind = protocol.TypeReturn
			}
			if keep == nil || keep(it) {
				s.items = append(s.items, it)
				s.bytes += int64(len(it.body))
			}
		}
		s.next = max(s.next, seq+1)
		return true
	})
	s.size, s.damage = int64(end), damage
	return nil
}

// compact rewrites the log with what waits (and a trim record that keeps
// the sequence going), durably, and reopens it for appending; if it
// cannot, the log is as it was. s.mu is held or s is not shared yet.
func (s *spool) compact() error {
	var buf []byte
	trim := s.next - 1
	if len(s.items) > 0 {
		trim = s.items[0].seq - 1
	}
	if trim > 0 {
		buf = reclog.Append(buf, recTrim, trim, nil)
	}
	for _, it := range s.items {
		buf = reclog.Append(buf, kindByte(it.kind), it.seq, it.body)
	}
	if err := atomicfile.Write(s.path, buf, 0o600); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Close() // the replaced file's
	}
	s.garbage, s.size = 0, int64(len(buf))
	var err error
	if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		s.f = nil
	}
	return err
}

// appendLocked writes records at the end of the log. A write that fails
// may have written part of them: the log is cut back to its last whole
// record, so that later records do not sit behind a torn one (should
// that fail too, load finds them past it, and reports the torn bytes).
func (s *spool) appendLocked(buf []byte) error {
	s.dirty = true
	if _, err := s.f.Write(buf); err != nil {
		s.f.Truncate(s.size)
		return err
	}
	s.size += int64(len(buf))
	return nil
}

func kindByte(t protocol.Type) byte {
	if t == protocol.TypeReturn {
		return recReturn
	}
	return recEvent
}

// push appends an item and returns once it is written to the log, with its seq and
// how many older items were dropped to make room for it. The newest item
// is always kept, even alone past max.
func (s *spool) push(kind protocol.Type, body []byte) (seq uint64, dropped int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return 0, 0, fmt.Errorf("push to outbox spool %s: closed", s.path)
	}
	seq = s.next
	var over uint64
	size := s.bytes + int64(len(body))
	for _, it := range s.items {
		if size <= s.max {
			break
		}
		size -= int64(len(it.body))
		over = it.seq
		dropped++
	}
	var buf []byte
	if over != 0 {
		buf = reclog.Append(buf, recTrim, over, nil)
	}
	buf = reclog.Append(buf, kindByte(kind), seq, body)
	if err := s.appendLocked(buf); err != nil {
		return 0, 0, fmt.Errorf("push to outbox spool %s: %w", s.path, err)
	}
	if over != 0 {
		s.trimLocked(over)
	}
	s.next++
	s.items = append(s.items, spoolItem{seq: seq, kind: kind, body: body})
	s.bytes += int64(len(body))
	return seq, dropped, nil
}

// after returns the oldest item whose seq is above seq.
func (s *spool) after(seq uint64) (spoolItem, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		if it.seq > seq {
			return it, true
		}
	}
	return spoolItem{}, false
}

// ack forgets every item up to seq. The record is not synced: lost in a
// crash, the items are delivered again.
func (s *spool) ack(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq <= s.trimmed {
		return nil
	}
	if s.f == nil {
		return fmt.Errorf("ack outbox spool %s: closed", s.path)
	}
	s.trimLocked(seq)
	var cerr error
	if s.garbage > compactGarbage && s.garbage > s.bytes {
		if cerr = s.compact(); cerr == nil {
			return nil
		}
		cerr = fmt.Errorf("compact outbox spool %s: %w", s.path, cerr)
		if s.f == nil {
			return cerr
		}
	}
	// A trim record lost (a full disk) is no loss: the next one covers
	// it, and a crash meanwhile sends the items again.
	if err := s.appendLocked(reclog.Append(nil, recTrim, seq, nil)); err != nil {
		return fmt.Errorf("ack outbox spool %s: %w", s.path, err) // and cerr, likely the same
	}
	return cerr
}

// trimLocked removes the items up to seq from memory.
func (s *spool) trimLocked(seq uint64) {
	if seq <= s.trimmed {
		return
	}
	s.trimmed = seq
	i := 0
	for ; i < len(s.items) && s.items[i].seq <= seq; i++ {
		n := int64(len(s.items[i].body))
		s.bytes -= n
		s.garbage += n + 16
	}
	s.garbage += 16 // the trim record itself
	clear(s.items[:i])
	s.items = s.items[i:]
}

// len is how many items wait.
func (s *spool) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// close closes the log; what waits stays on disk for the next open.
func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.f
	s.f = nil
	return syncClose(f)
}

// syncClose syncs and closes f (nil: nothing to do), reporting the close's
// error before the sync's.
func syncClose(f *os.File) error {
	if f == nil {
		return nil
	}
	serr := f.Sync()
	if err := f.Close(); err != nil {
		return err
	}
	return serr
}
