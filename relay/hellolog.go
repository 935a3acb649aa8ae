package relay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// The devices' Hellos, as forwarded, are kept in one append-only file of
// the spool's directory, hello.log: a record per session, appended when
// the session is taken in (a write of a few hundred bytes). A device's
// Hello is its id's last intact record. The file is rewritten with only
// those once it has grown past twice its size when last rewritten, and at
// load with only the Hellos of the devices whose items wait.
//
// Relays before it kept a file per device under hello/: an open with
// O_TRUNC, a write and a close per session, which on ext4 (truncating a
// file whose blocks were not yet allocated forces them out) was a quarter
// of the relay's CPU while 10,000 devices reconnected after a restart.
// load still reads that directory once, then deletes it.
//
// A Hello is written before any item of its session and fsynced before the
// segment that holds them (flushLoop), so an item that survives a power
// loss has its Hello. A damaged Hello record is skipped: its device's
// previous intact Hello, if the log has one, is used instead, and the
// master, agreeing that older session's key, refuses the items' MACs;
// they are lost as they would be with no Hello (the device still has
// them unless it died).
const (
	helloLogName = "hello.log"
	// helloSlack is how far past twice its rewritten size the log grows
	// before it is rewritten again.
	helloSlack = 1 << 20
	// legacyHelloDir is the directory of one file per device that relays
	// before hello.log kept.
	legacyHelloDir = "hello"
)

// helloLog is the open hello.log.
type helloLog struct {
	mu    sync.Mutex
	path  string
	f     *os.File // O_APPEND; nil until opened
	size  int64    // bytes in the file
	base  int64    // its size when last rewritten
	dirty bool     // written since the last fsync
	// closed: the store was closed; a Hello saved after that (a device
	// taken in while the relay stops) is not kept, nor the file reopened.
	closed bool
}

// appendHello appends the Hello record of device id (wire: the encoded
// Hello) to dst: the body is the id's length (uvarint), the id, the Hello.
func appendHello(dst []byte, id string, wire []byte) []byte {
	dst, start := reclog.Start(dst, recHello, 0)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	dst = append(dst, id...)
	return reclog.Finish(append(dst, wire...), start)
}

// saveHello keeps the Hello d's session upstream was opened with.
func (s *store) saveHello(d *device) error {
	d.mu.Lock()
	b, err := protocol.Encode(d.hello)
	d.mu.Unlock()
	if err != nil {
		return err
	}
	rec := appendHello(nil, d.id, b)
	h := &s.hellos
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("relay spool: closed; the Hello of " + d.id + " is not kept")
	}
	if err := h.openLocked(s.dir); err != nil {
		return err
	}
	// O_APPEND: a short write leaves a torn record that reading back
	// skips; the next one starts after it.
	n, err := h.f.Write(rec)
	h.size += int64(n)
	h.dirty = true
	if err != nil {
		return fmt.Errorf("relay spool: keep the Hello of %s: %w", d.id, err)
	}
	if h.size > 2*h.base+helloSlack {
		// Not fatal: the log goes on growing until a rewrite succeeds.
		if err := h.rewriteLocked(nil); err != nil {
			s.log.Warn("relay spool: rewrite the Hellos' log: " + err.Error())
		}
	}
	return nil
}

// openLocked opens the log for appending if it is not open.
func (h *helloLog) openLocked(dir string) error {
	if h.f != nil {
		return nil
	}
	h.path = filepath.Join(dir, helloLogName)
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("relay spool: open the Hellos' log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("relay spool: open the Hellos' log: %w", err)
	}
	h.f, h.size = f, st.Size()
	h.base = h.size
	return nil
}

// readHellos reads the log at path back: the last intact record of each
// id, as it is on disk, and the damage skipped. A missing file is empty.
func readHellos(path string) (map[string][]byte, []reclog.Damage, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string][]byte{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	last := make(map[string][]byte)
	_, damage := reclog.Scan(b, maxWireRecord, func(off, n int, rec reclog.Record, _ int) bool {
		id, _, ok := splitWire(rec.Body)
		if !ok || rec.Kind != recHello {
			return false
		}
		last[id] = b[off : off+n]
		return true
	})
	return last, damage, nil
}

// decodeHello decodes the Hello of a record readHellos gave; nil if it is
// not id's.
func decodeHello(id string, rec []byte) *protocol.Hello {
	r, _, ok := reclog.Next(rec, maxWireRecord)
	if !ok {
		return nil
	}
	rid, wire, ok := splitWire(r.Body)
	if !ok || rid != id {
		return nil
	}
	return helloOf(id, wire)
}

// helloOf decodes an encoded Hello; nil if it is not one, or not id's.
func helloOf(id string, wire []byte) *protocol.Hello {
	msg, err := protocol.Decode(wire)
	if err != nil {
		return nil
	}
	hello, ok := msg.(*protocol.Hello)
	if !ok || hello.ID != id {
		return nil
	}
	return hello
}

// rewriteLocked replaces the log with the last record of each id in it
// (of each id keep holds, if keep is not nil), written to a new file,
// fsynced and renamed over it; the log stays open for appending.
func (h *helloLog) rewriteLocked(keep map[string]bool) error {
	last, _, err := readHellos(h.path)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		if keep == nil || keep[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []byte
	for _, id := range ids {
		out = append(out, last[id]...)
	}
	tmp := h.path + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(out)
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp, h.path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
	if err := h.openLocked(filepath.Dir(h.path)); err != nil {
		return err
	}
	h.dirty = false
	return nil
}

// syncHellos fsyncs the log if it was written since the last time.
func (s *store) syncHellos() error {
	h := &s.hellos
	h.mu.Lock()
	f, dirty := h.f, h.dirty
	h.dirty = false
	h.mu.Unlock()
	if !dirty || f == nil {
		return nil
	}
	// Rewritten (and so closed) meanwhile: the new file was fsynced.
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// closeHellos closes the log.
func (s *store) closeHellos() error {
	h := &s.hellos
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.f == nil {
		return nil
	}
	err := h.f.Close()
	h.f = nil
	return err
}

// legacyHello reads back id's Hello from the directory relays before
// hello.log kept (a file per device named by a hash of its id); nil if
// there is none intact.
func (s *store) legacyHello(id string) *protocol.Hello {
	sum := sha256.Sum256([]byte(id))
	b, err := os.ReadFile(filepath.Join(s.dir, legacyHelloDir, hex.EncodeToString(sum[:16])))
	if err != nil {
		return nil
	}
	rec, _, ok := reclog.Next(b, protocol.DefaultMaxFrame)
	if !ok || rec.Kind != recHello {
		return nil
	}
	return helloOf(id, rec.Body)
}

// loadHellos gives the Hello of each id of held (the devices whose items
// wait) that has one, from the log or the legacy directory, rewrites the
// log with only those and deletes the directory. The damage skipped in
// the log is returned.
func (s *store) loadHellos(held map[string][]*item) (map[string]*protocol.Hello, []reclog.Damage, error) {
	h := &s.hellos
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = false // opened (again)
	h.path = filepath.Join(s.dir, helloLogName)
	last, damage, err := readHellos(h.path)
	if err != nil {
		return nil, nil, err
	}
	got := make(map[string]*protocol.Hello)
	keep := make(map[string]bool)
	var legacy []byte // records for the Hellos read from the legacy directory
	for id, items := range held {
		if len(items) == 0 {
			continue
		}
		if rec, ok := last[id]; ok {
			if hello := decodeHello(id, rec); hello != nil {
				got[id], keep[id] = hello, true
				continue
			}
		}
		if hello := s.legacyHello(id); hello != nil {
			wire, err := protocol.Encode(hello)
			if err != nil {
				continue
			}
			got[id] = hello
			legacy = appendHello(legacy, id, wire)
		}
	}
	if err := h.rewriteLocked(keep); err != nil {
		return nil, nil, err
	}
	if len(legacy) > 0 {
		n, err := h.f.Write(legacy)
		h.size += int64(n)
		if err == nil {
			err = h.f.Sync()
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if err := os.RemoveAll(filepath.Join(s.dir, legacyHelloDir)); err != nil {
		return nil, nil, err
	}
	return got, damage, nil
}
