package returners

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/internal/reclog"
)

// Spool is a Store in two append-only files of JSON lines, for the agent,
// which must not link bbolt: NAME.spool logs pushes ({"p": seq, "i":
// item}) and acks ({"a": seq}); NAME.dead holds the dead letters. What
// waits is also held in memory (a spool is small: an agent's own returns).
// The log is compacted when it is opened and when most of it is acked.
//
// Each line carries a CRC-32C of what it says ({"c": hex}); a line
// without one, of a log an older version wrote, still loads (a bit flip
// that turns "c" into another key spares what the line says), and the
// log is rewritten with them at once. A damaged line (a
// torn write, a flipped bit) is dropped and reported (Damage), the lines
// after it kept: a damaged push loses that item, a damaged ack sends its
// item again. A write that fails (a full disk) is cut off the log, back to
// its last whole line, so that the next line does not join a torn one.
type Spool struct {
	path, deadPath string
	max            int
	ready          chan struct{}

	mu      sync.Mutex
	f       *os.File
	next    uint64
	pending []Entry
	garbage int // lines in the log that no longer matter
	dead    int
	size    int64 // end of the log's last whole line
	torn    bool  // a failed write may have left bytes past size
	// Damage is the ranges of the log dropped as damaged when it was
	// opened.
	Damage []reclog.Damage
}

var _ Store = (*Spool)(nil)

type spoolLine struct {
	P uint64          `json:"p,omitempty"`
	I json.RawMessage `json:"i,omitempty"`
	A uint64          `json:"a,omitempty"`
	C string          `json:"c,omitempty"` // CRC-32C of the line (see sum)
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// sum is the CRC-32C a line carries: of P, A and I as they are in the
// line.
func (l *spoolLine) sum() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], l.P)
	binary.LittleEndian.PutUint64(b[8:], l.A)
	return strconv.FormatUint(uint64(crc32.Update(crc32.Checksum(b[:], crcTable), crcTable, l.I)), 16)
}

// OpenSpool opens or creates the spool dir/name.spool (and name.dead),
// holding at most max items (no bound when max <= 0).
func OpenSpool(dir, name string, max int) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open returner spool %s: %w", name, err)
	}
	s := &Spool{path: filepath.Join(dir, name+".spool"), deadPath: filepath.Join(dir, name+".dead"),
		max: max, ready: make(chan struct{}, 1), next: 1}
	if err := s.load(); err != nil {
		return nil, fmt.Errorf("open returner spool %s: %w", s.path, err)
	}
	if err := s.compact(); err != nil {
		// A full disk, say: go on with the log as it is, past its last
		// whole line cut off at the first write.
		if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return nil, fmt.Errorf("open returner spool %s: %w", s.path, err)
		}
		s.torn = true
	}
	if n, err := countLines(s.deadPath); err == nil {
		s.dead = n
	}
	if len(s.pending) > 0 {
		s.ready <- struct{}{}
	}
	return s, nil
}

// load reads the log line by line; a line that does not parse or does
// not match its CRC is damage (see Spool).
func (s *Spool) load() error {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	acked, pushedSeq := map[uint64]bool{}, map[uint64]bool{}
	var pushed []Entry
	for off := 0; off < len(b); {
		n := bytes.IndexByte(b[off:], '\n') + 1
		whole := n > 0
		if !whole {
			n = len(b) - off
		}
		line := b[off : off+n]
		var l spoolLine
		ok := whole && json.Unmarshal(line, &l) == nil
		switch {
		case !ok:
		case l.C != "":
			ok = l.C == l.sum() && (l.P == 0) != (l.A == 0)
		default:
			ok = (l.P == 0) != (l.A == 0) // an older version's line
		}
		// A second push of a seq, or one of nothing, is not a line this
		// spool writes.
		ok = ok && (l.P == 0 || len(l.I) > 0 && !pushedSeq[l.P])
		off += n
		if !ok {
			s.Damage = append(s.Damage, reclog.Damage{From: off - n, To: off})
			continue
		}
		s.size = int64(off)
		switch {
		case l.A != 0:
			acked[l.A] = true
		case l.P != 0:
			pushedSeq[l.P] = true
			raw := append([]byte(nil), l.I...)
			pushed = append(pushed, Entry{Seq: l.P, Raw: raw})
		}
		// An ack counts too: its item's push line may be the damaged one,
		// and its seq must not be used again.
		s.next = max(s.next, l.P+1, l.A+1)
	}
	for _, e := range pushed {
		if !acked[e.Seq] {
			s.pending = append(s.pending, e)
		}
	}
	return nil
}

// compact rewrites the log with only what waits, and reopens it for
// appending. s.mu is held or s is not shared yet.
func (s *Spool) compact() error {
	lines := make([]spoolLine, 0, len(s.pending))
	for _, e := range s.pending {
		lines = append(lines, spoolLine{P: e.Seq, I: e.Raw})
	}
	buf := marshalLines(lines)
	if err := atomicfile.Write(s.path, buf, 0o600); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Close() // the replaced file's
	}
	s.garbage, s.size, s.torn = 0, int64(len(buf)), false
	var err error
	if s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
		s.f = nil
	}
	return err
}

// marshalLines encodes lines, each with its CRC, by hand: I as it is
// (JSON on one line: what json.Marshal made, or a line held), not
// compacted or escaped again as json.Marshal would, so that it reads back
// as the bytes its CRC is of.
func marshalLines(lines []spoolLine) []byte {
	var buf []byte
	for _, l := range lines {
		if l.P != 0 {
			if len(l.I) == 0 {
				l.I = json.RawMessage("null")
			}
			buf = append(strconv.AppendUint(append(buf, `{"p":`...), l.P, 10), `,"i":`...)
			buf = append(buf, l.I...)
		} else {
			buf = strconv.AppendUint(append(buf, `{"a":`...), l.A, 10)
		}
		buf = append(append(append(buf, `,"c":"`...), l.sum()...), "\"}\n"...)
	}
	return buf
}

// appendLines writes lines to the log; sync makes them durable first.
// A write that fails may have written part of them: the log is cut back
// to its last whole line (now, or before the next write if that fails
// too), so that the next line does not join a torn one.
func (s *Spool) appendLines(lines []spoolLine, sync bool) error {
	buf := marshalLines(lines)
	if s.torn {
		if err := s.f.Truncate(s.size); err != nil {
			return err // wrapped by the caller: push to or ack returner spool
		}
		s.torn = false
	}
	if _, err := s.f.Write(buf); err != nil {
		s.torn = s.f.Truncate(s.size) != nil
		return err
	}
	s.size += int64(len(buf))
	if sync {
		return s.f.Sync()
	}
	return nil
}

// Push appends items and returns once they are on disk.
func (s *Spool) Push(items ...*Item) error {
	raws := make([][]byte, len(items))
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("push %s: %w", it.Kind, err)
		}
		raws[i] = b
	}
	return s.pushRaw(raws)
}

func (s *Spool) pushRaw(raws [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushLocked(raws)
}

func (s *Spool) pushLocked(raws [][]byte) error {
	if s.f == nil {
		return fmt.Errorf("push to returner spool %s: closed", s.path)
	}
	if s.max > 0 && len(s.pending)+len(raws) > s.max {
		return ErrFull
	}
	lines := make([]spoolLine, len(raws))
	for i, raw := range raws {
		lines[i] = spoolLine{P: s.next + uint64(i), I: raw}
	}
	if err := s.appendLines(lines, true); err != nil {
		return fmt.Errorf("push to returner spool %s: %w", s.path, err)
	}
	for i, raw := range raws {
		s.pending = append(s.pending, Entry{Seq: s.next + uint64(i), Raw: raw})
	}
	s.next += uint64(len(raws))
	select {
	case s.ready <- struct{}{}:
	default:
	}
	return nil
}

// Ready receives a value after a push (and at open when items wait).
func (s *Spool) Ready() <-chan struct{} { return s.ready }

// Peek returns up to n items from the head, oldest first.
func (s *Spool) Peek(n int) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, len(s.pending))
	out := make([]Entry, n)
	for i, e := range s.pending[:n] {
		out[i] = Entry{Seq: e.Seq, Raw: e.Raw, Item: DecodeItem(e.Raw)}
	}
	return out, nil
}

// Ack removes delivered items. The ack lines are not synced: a crash
// before they reach the disk delivers those items again (at least once).
func (s *Spool) Ack(seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ack(seqs)
}

func (s *Spool) ack(seqs []uint64) error {
	if s.f == nil {
		return fmt.Errorf("ack returner spool %s: closed", s.path)
	}
	gone := make(map[uint64]bool, len(seqs))
	lines := make([]spoolLine, len(seqs))
	for i, q := range seqs {
		gone[q] = true
		lines[i] = spoolLine{A: q}
	}
	kept := s.pending[:0]
	for _, e := range s.pending {
		if !gone[e.Seq] {
			kept = append(kept, e)
		}
	}
	clear(s.pending[len(kept):])
	s.pending = kept
	s.garbage += 2 * len(seqs)
	var cerr error
	if s.garbage > 1024 && s.garbage > 2*len(s.pending) {
		if cerr = s.compact(); cerr == nil {
			return nil
		}
		cerr = fmt.Errorf("compact returner spool %s: %w", s.path, cerr)
		if s.f == nil {
			return cerr
		}
	}
	if err := s.appendLines(lines, false); err != nil {
		return fmt.Errorf("ack returner spool %s: %w", s.path, err) // and cerr, likely the same
	}
	return cerr
}

// Bury moves e to NAME.dead with the reason.
func (s *Spool) Bury(e Entry, reason string) error {
	dl, err := DeadLetterJSON(e.Raw, reason)
	if err != nil {
		return fmt.Errorf("bury %d: %w", e.Seq, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.deadPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("bury %d: %w", e.Seq, err)
	}
	_, err = f.Write(append(dl, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("bury %d: %w", e.Seq, err)
	}
	s.dead++
	return s.ack([]uint64{e.Seq})
}

// DeadLetters returns the items set aside, oldest first.
func (s *Spool) DeadLetters() ([]DeadLetter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadLetters()
}

func (s *Spool) deadLetters() ([]DeadLetter, error) {
	b, err := os.ReadFile(s.deadPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	var out []DeadLetter
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		var d DeadLetter
		if len(line) > 0 && json.Unmarshal(line, &d) == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// RequeueDead moves every dead letter back to the tail of the spool.
func (s *Spool) RequeueDead() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dl, err := s.deadLetters()
	if err != nil || len(dl) == 0 {
		return 0, err
	}
	raws := make([][]byte, len(dl))
	for i, d := range dl {
		raws[i] = d.Item
	}
	if err := s.pushLocked(raws); err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	// A crash here leaves the letters both queued and dead: requeued again
	// later, they are delivered at least once, as everything else.
	if err := os.Truncate(s.deadPath, 0); err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	s.dead = 0
	return len(raws), nil
}

// Depth is how many items wait.
func (s *Spool) Depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Dead is how many items were set aside.
func (s *Spool) Dead() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Close closes the log.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if err != nil {
		return fmt.Errorf("close returner spool %s: %w", s.path, err)
	}
	return nil
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	r := bufio.NewReader(f)
	for {
		_, err := r.ReadBytes('\n')
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}
