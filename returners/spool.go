package returners

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/halite-fleet/halite/internal/atomicfile"
)

// Spool is a Store in two append-only files of JSON lines, for the agent,
// which must not link bbolt: NAME.spool logs pushes ({"p": seq, "i":
// item}) and acks ({"a": seq}); NAME.dead holds the dead letters. What
// waits is also held in memory (a spool is small: an agent's own returns).
// The log is compacted when it is opened and when most of it is acked. A
// torn last line (a crash mid-write) is skipped.
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
}

var _ Store = (*Spool)(nil)

type spoolLine struct {
	P uint64          `json:"p,omitempty"`
	I json.RawMessage `json:"i,omitempty"`
	A uint64          `json:"a,omitempty"`
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
		return nil, fmt.Errorf("open returner spool %s: %w", s.path, err)
	}
	if n, err := countLines(s.deadPath); err == nil {
		s.dead = n
	}
	if len(s.pending) > 0 {
		s.ready <- struct{}{}
	}
	return s, nil
}

func (s *Spool) load() error {
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	acked := map[uint64]bool{}
	var pushed []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var l spoolLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a torn line
		}
		switch {
		case l.A != 0:
			acked[l.A] = true
		case l.P != 0:
			raw := append([]byte(nil), l.I...)
			pushed = append(pushed, Entry{Seq: l.P, Raw: raw})
		}
		if l.P >= s.next {
			s.next = l.P + 1
		}
	}
	if err := sc.Err(); err != nil {
		return err
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
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	var buf bytes.Buffer
	for _, e := range s.pending {
		b, _ := json.Marshal(spoolLine{P: e.Seq, I: e.Raw})
		buf.Write(append(b, '\n'))
	}
	if err := atomicfile.Write(s.path, buf.Bytes(), 0o600); err != nil {
		return err
	}
	s.garbage = 0
	var err error
	s.f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	return err
}

// appendLines writes lines to the log; sync makes them durable first.
func (s *Spool) appendLines(lines []spoolLine, sync bool) error {
	var buf []byte
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	if _, err := s.f.Write(buf); err != nil {
		return err
	}
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
	if s.garbage > 1024 && s.garbage > 2*len(s.pending) {
		if err := s.compact(); err != nil {
			return fmt.Errorf("compact returner spool %s: %w", s.path, err)
		}
		return nil
	}
	if err := s.appendLines(lines, false); err != nil {
		return fmt.Errorf("ack returner spool %s: %w", s.path, err)
	}
	return nil
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
