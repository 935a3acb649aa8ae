package relay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// Record kinds of the relay's spool.
const (
	recWire   = 'w' // a device's return or event: uvarint id length, id, wire frame
	recAck    = 'a' // the master acknowledged a device's items up to seq: id
	recForget = 'f' // the device left while the relay ran: its items before this are not to be resumed: id
	recHello  = 'h' // a device's Hello as forwarded (seq 0), in hello.log: uvarint id length, id, Hello
)

const (
	// maxSegment and minSegment bound the size of a segment file; within
	// them (and never past spool_max) it is an eighth of spool_max, so
	// that dropping the oldest segment for room drops an eighth of what
	// waits, not all of it.
	maxSegment = 4 << 20
	minSegment = 64 << 10
	// flushSize and flushDelay bound the write buffer: records reach the
	// file once this many bytes wait, or this long after the first of
	// them, so that 10,000 devices answering a job within a second cost a
	// few writes, not 10,000.
	flushSize  = 64 << 10
	flushDelay = 50 * time.Millisecond
	// syncEvery is how often at most the segment being written is
	// fsynced while it holds items.
	syncEvery = time.Second
	// segSuffix names segment files: <id, 16 hex digits>.seg.
	segSuffix = ".seg"
)

// maxWireRecord bounds a record's body when a segment is read back: a
// longer length is damage.
const maxWireRecord = protocol.DefaultMaxFrame + 1024

// store holds what devices sent for the master and the master has not yet
// acknowledged: returns and events, per device in order, in an append-only
// log of segment files under cachedir/relay-spool, so that a long WAN cut
// costs the relay disk, not memory. Memory holds only an index entry per
// item (its segment, offset, size and seq) and a write buffer of at most
// about flushSize bytes.
//
// While the upstream link is up an item stays from when it arrives until
// the master's Ack covers it; while the link is down everything waits
// here, and after a reconnect each device's items are read back and sent
// again, in order, before anything new. Acks reach the device only from
// the master, end to end, so the device keeps its own copy in its spool all
// along: the relay's files are not the durable copy, and an item dropped
// here is not lost; the device is disconnected so that it sends it again.
// Items are dropped for room (past spool_max bytes of segments on disk the
// oldest segment goes whole, its items counted) and when they cannot be
// written (a full disk: counted too). What a previous run left is sent
// by resuming its devices' sessions (see resume.go).
//
// A segment is deleted as soon as none of its items waits; the one being
// written, when it is the only one, is emptied instead. The master's acks
// are logged too, and devices that leave, so that a restart sends only
// what was never acknowledged by a device that had not left.
type store struct {
	dir    string
	max    int64
	segMax int64
	log    *zap.Logger
	// onLost, if set, is told (without the lock held) of devices that lost
	// items when a background write failed; put returns its own.
	onLost func([]*device)

	mu      sync.Mutex
	segs    []*segment // on disk, oldest first; the last is the one written to
	nextSeg uint64
	buf     []byte // records of the last segment not yet written, from its written offset
	disk    int64  // bytes of segs, written or buffered
	bytes   int64  // wire bytes of the items held
	items   int
	dropped uint64 // items dropped, ever: for room, unwritable, or left by a previous run
	failed  uint64 // items dropped because they could not be written, ever
	failing bool   // the last write failed (its error was logged)
	corrupt uint64 // bytes of segments dropped as damaged when they were loaded, ever
	dirty   bool   // written since the last fsync
	opened  bool
	orphans []*device // devices of the previous run whose items wait (see load)

	hellos helloLog // the devices' Hellos (hellolog.go), under its own lock

	kick chan struct{} // the flusher has something to do
	stop chan struct{}
	done chan struct{}
}

// segment is one file of the log.
type segment struct {
	path    string
	sealed  bool // left by a previous run: read, never written
	f       *os.File
	size    int64   // bytes of its records, written or buffered
	written int64   // bytes written to f
	torn    bool    // a failed write may have left bytes past written
	live    int     // items not gone
	items   []*item // every item written to it, in order
}

// item is the index entry of one return or event.
type item struct {
	d    *device
	seg  *segment // nil once its record is off the disk
	off  int64    // of its record in seg
	size int32    // of its record
	wire int32    // length of its wire frame
	seq  uint64
	gone bool // acked, forgotten or dropped
}

// newStore makes a store of at most limit bytes of segments in dir; open
// readies it.
func newStore(dir string, limit int64, log *zap.Logger) *store {
	return &store{dir: dir, max: limit, segMax: max(min(limit/8, maxSegment), min(minSegment, limit), 1), log: log}
}

// open makes the directory, takes up what a previous run left in it (see
// load), and starts the flusher; close stops it.
func (s *store) open() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("open relay spool %s: %w", s.dir, err)
	}
	if err := s.load(); err != nil {
		return fmt.Errorf("open relay spool %s: %w", s.dir, err)
	}
	s.kick = make(chan struct{}, 1)
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	s.mu.Lock()
	s.opened = true
	s.mu.Unlock()
	go s.flushLoop()
	return nil
}

// appendWire appends the record of a device's item to dst.
func appendWire(dst []byte, id string, seq uint64, wire []byte) []byte {
	dst, start := reclog.Start(dst, recWire, seq)
	dst = binary.AppendUvarint(dst, uint64(len(id)))
	dst = append(dst, id...)
	return reclog.Finish(append(dst, wire...), start)
}

func wireRecordSize(id string, wire []byte) int {
	n := 1 // the uvarint of len(id)
	for x := len(id); x >= 0x80; x >>= 7 {
		n++
	}
	return reclog.Size(n + len(id) + len(wire))
}

// splitWire splits a recWire body into the device id and the wire frame.
func splitWire(body []byte) (id string, wire []byte, ok bool) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)-k) {
		return "", nil, false
	}
	return string(body[k : k+int(n)]), body[k+int(n):], true
}

// close writes what is buffered, stops the flusher and closes the files;
// what waits stays on disk, for the next open to count.
func (s *store) close() error {
	s.mu.Lock()
	if !s.opened {
		s.mu.Unlock()
		return nil
	}
	s.opened = false
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	lost := s.flushLocked(nil)
	var err error
	for _, seg := range s.segs {
		if e := seg.f.Close(); e != nil && err == nil {
			err = fmt.Errorf("close relay spool %s: %w", s.dir, e)
		}
		seg.f = nil
	}
	if len(lost) > 0 {
		err = errors.Join(err, fmt.Errorf("close relay spool %s: %d devices' items could not be written", s.dir, len(lost)))
	}
	if e := s.closeHellos(); e != nil && err == nil {
		err = fmt.Errorf("close relay spool %s: %w", s.dir, e)
	}
	return err
}

// flushLoop writes the buffer flushDelay after it gets its first record
// (put writes it sooner once it holds flushSize bytes), and fsyncs the
// segment being written at most every syncEvery while items wait.
func (s *store) flushLoop() {
	defer close(s.done)
	t := time.NewTimer(flushDelay)
	t.Stop()
	var lastSync time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		}
		t.Reset(flushDelay)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		s.mu.Lock()
		lost := s.flushLocked(nil)
		var f *os.File
		if s.dirty && s.items > 0 && time.Since(lastSync) >= syncEvery {
			if cur := s.currentLocked(); cur != nil {
				f = cur.f
			}
			s.dirty = false
		}
		again := s.dirty && s.items > 0
		s.mu.Unlock()
		if len(lost) > 0 && s.onLost != nil {
			s.onLost(lost)
		}
		if f != nil {
			lastSync = time.Now()
			// The Hellos first: an item synced has its Hello on disk.
			if err := s.syncHellos(); err != nil {
				s.log.Warn("relay spool: fsync the Hellos' log", zap.String("dir", s.dir), zap.Error(err))
			}
			// A segment closed meanwhile (dropped or emptied) needs no sync.
			if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
				s.log.Warn("relay spool: fsync", zap.String("dir", s.dir), zap.Error(err))
			}
		}
		if again {
			s.wake() // to sync once syncEvery has passed
		}
	}
}

// wake tells the flusher there is something to write.
func (s *store) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// put keeps a device's item; it returns the devices that lost items to
// make room, or because it could not be written (they must send them
// again: disconnect them). d may be among them.
func (s *store) put(d *device, seq uint64, wire []byte) (lost []*device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.opened {
		return s.refuseLocked(d, lost, errors.New("closed"))
	}
	n := int64(wireRecordSize(d.id, wire))
	cur := s.currentLocked()
	if cur == nil || cur.sealed || cur.size > 0 && cur.size+n > s.segMax {
		var err error
		if cur, lost, err = s.rotateLocked(lost); err != nil {
			return s.refuseLocked(d, lost, err)
		}
	}
	if len(s.buf) == 0 {
		s.wake()
	}
	it := &item{d: d, seg: cur, off: cur.size, size: int32(n), wire: int32(len(wire)), seq: seq}
	s.buf = appendWire(s.buf, d.id, seq, wire)
	cur.size += n
	cur.live++
	cur.items = append(cur.items, it)
	s.disk += n
	s.bytes += int64(len(wire))
	s.items++
	d.pending = append(d.pending, it)
	// The newest segment stays even if it alone is past max (one record
	// larger than spool_max).
	for s.disk > s.max && len(s.segs) > 1 {
		lost = s.dropSegmentLocked(s.segs[0], lost)
	}
	if len(s.buf) >= flushSize {
		lost = s.flushLocked(lost)
	}
	return lost
}

// refuseLocked counts an item that could not be kept as dropped, and
// marks its device.
func (s *store) refuseLocked(d *device, lost []*device, err error) []*device {
	s.dropped++
	s.failed++
	if !s.failing {
		s.failing = true
		s.log.Warn("relay spool: cannot keep returns and events; their devices must send them again",
			zap.String("dir", s.dir), zap.Error(err))
	}
	return markLost(d, lost)
}

func markLost(d *device, lost []*device) []*device {
	if d.lost {
		return lost
	}
	d.lost = true
	return append(lost, d)
}

func (s *store) currentLocked() *segment {
	if len(s.segs) == 0 {
		return nil
	}
	return s.segs[len(s.segs)-1]
}

// rotateLocked writes out the current segment and starts a new one.
func (s *store) rotateLocked(lost []*device) (*segment, []*device, error) {
	if cur := s.currentLocked(); cur != nil && !cur.sealed {
		lost = s.flushLocked(lost)
		if cur.live == 0 {
			s.removeLocked(cur)
		}
	}
	path := filepath.Join(s.dir, fmt.Sprintf("%016x%s", s.nextSeg, segSuffix))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, lost, err
	}
	s.nextSeg++
	seg := &segment{path: path, f: f}
	s.segs = append(s.segs, seg)
	return seg, lost, nil
}

// flushLocked writes the buffer to the current segment. If the write
// fails, the items in the buffer are dropped and their devices returned.
func (s *store) flushLocked(lost []*device) []*device {
	cur := s.currentLocked()
	if cur == nil || cur.sealed {
		return lost
	}
	if cur.live == 0 && len(s.segs) == 1 {
		// Nothing waits (acked before it was ever written, in the common
		// case): start the segment again rather than write what nobody
		// needs. Not while older segments hold items: the acks in the
		// buffer are what keeps a restart from counting those.
		s.emptyLocked(cur)
		return lost
	}
	if len(s.buf) == 0 {
		return lost
	}
	err := writeSegment(cur, s.buf)
	s.resetBuf()
	if err == nil {
		if s.failing {
			s.failing = false
			s.log.Info("relay spool: writing again", zap.String("dir", s.dir))
		}
		cur.written = cur.size
		s.dirty = true
		return lost
	}
	// What was buffered is not on disk: drop it (writeSegment cut off
	// what part of it the file held).
	i := len(cur.items)
	for i > 0 && cur.items[i-1].off >= cur.written {
		i--
	}
	for _, it := range cur.items[i:] {
		it.seg = nil
		if !it.gone {
			s.goneLocked(it)
			s.failed++
			s.dropped++
			lost = markLost(it.d, lost)
		}
	}
	clear(cur.items[i:])
	cur.items = cur.items[:i]
	s.disk -= cur.size - cur.written
	cur.size = cur.written
	if !s.failing {
		s.failing = true
		s.log.Warn("relay spool: write failed; the devices of what it held must send it again",
			zap.String("dir", s.dir), zap.Error(err))
	}
	return lost
}

// writeSegment writes buf at the end of what seg's file holds. A write
// that fails may have written part of buf: the file is cut back to its
// last whole record (now, or before the next write if that fails too), so
// that a restart does not read records the relay dropped and counted
// (their devices send them again), nor lose those written after them.
func writeSegment(seg *segment, buf []byte) error {
	if seg.torn {
		if err := seg.f.Truncate(seg.written); err != nil {
			return fmt.Errorf("cut off a failed write: %w", err)
		}
		seg.torn = false
	}
	if _, err := seg.f.WriteAt(buf, seg.written); err != nil {
		seg.torn = seg.f.Truncate(seg.written) != nil
		return err
	}
	return nil
}

// resetBuf empties the write buffer, and lets go of its array if a large
// record grew it.
func (s *store) resetBuf() {
	if cap(s.buf) > 4*flushSize {
		s.buf = nil
	}
	s.buf = s.buf[:0]
}

// emptyLocked starts the current segment again, none of its items
// waiting: its buffered records are dropped, its file truncated.
func (s *store) emptyLocked(cur *segment) {
	if cur.written > 0 {
		if err := cur.f.Truncate(0); err != nil {
			// Harmless: the next records overwrite it from the start.
			s.log.Debug("relay spool: truncate", zap.Error(err))
		}
	}
	for _, it := range cur.items {
		it.seg = nil
	}
	clear(cur.items)
	cur.items = cur.items[:0]
	s.resetBuf()
	s.disk -= cur.size
	cur.size, cur.written = 0, 0
}

// goneLocked forgets an item's bytes; settleLocked then deals with its
// segment.
func (s *store) goneLocked(it *item) {
	it.gone = true
	s.bytes -= int64(it.wire)
	s.items--
	if it.seg != nil {
		it.seg.live--
	}
}

// settleLocked deletes a segment none of whose items waits. The current
// one, if it is the only one, is emptied instead: now if it was never
// written, else at the next flush.
func (s *store) settleLocked(seg *segment) {
	if seg == nil || seg.live > 0 || !s.opened {
		return
	}
	switch {
	case seg != s.currentLocked() || seg.sealed:
		s.removeLocked(seg)
	case len(s.segs) > 1:
	case seg.written == 0:
		s.emptyLocked(seg)
	case seg.size > 0:
		s.wake()
	}
}

// dropSegmentLocked drops a segment whole, for room: its waiting items
// are counted and their devices marked.
func (s *store) dropSegmentLocked(seg *segment, lost []*device) []*device {
	for _, it := range seg.items {
		if !it.gone {
			s.goneLocked(it)
			s.dropped++
			lost = markLost(it.d, lost)
		}
	}
	s.removeLocked(seg)
	return lost
}

// removeLocked closes and deletes a segment.
func (s *store) removeLocked(seg *segment) {
	if seg == s.currentLocked() {
		s.resetBuf()
	}
	for _, it := range seg.items {
		it.seg = nil
	}
	seg.items = nil
	s.segs = slices.DeleteFunc(s.segs, func(o *segment) bool { return o == seg })
	s.disk -= seg.size
	seg.f.Close()
	if err := os.Remove(seg.path); err != nil {
		s.log.Warn("relay spool: delete segment", zap.Error(err))
	}
}

// ack forgets d's items up to seq.
func (s *store) ack(d *device, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for ; i < len(d.pending) && d.pending[i].seq <= seq; i++ {
		if !d.pending[i].gone {
			s.goneLocked(d.pending[i])
		}
	}
	for _, it := range d.pending[:i] {
		s.settleLocked(it.seg)
	}
	s.settleLocked(s.currentLocked()) // perhaps the only one left now
	onDisk := false
	for _, it := range d.pending[:i] {
		onDisk = onDisk || it.seg != nil
	}
	clear(d.pending[:i])
	d.pending = d.pending[i:]
	// The ack is logged if some acked record is still in a segment, so
	// that a restart does not send it again; not past spool_max (a restart
	// would send the item again: no worse than a crash before the write).
	if onDisk {
		s.logLocked(recAck, seq, d.id)
	}
}

// logLocked appends an ack or forget record to the current segment, if
// there is room for it under spool_max.
func (s *store) logLocked(kind byte, seq uint64, id string) {
	cur := s.currentLocked()
	if cur == nil || cur.sealed || !s.opened || s.disk+int64(reclog.Size(len(id))) > s.max {
		return
	}
	if len(s.buf) == 0 {
		s.wake()
	}
	buf, start := reclog.Start(s.buf, kind, seq)
	s.buf = reclog.Finish(append(buf, id...), start)
	cur.size += int64(len(s.buf) - start)
	s.disk += int64(len(s.buf) - start)
}

// pending returns d's items, oldest first, and whether d lost any. Items
// are read back from their segments, or from the write buffer (a flush
// here could fail and cost other devices their items, which attach, under
// d.mu, is in no position to tell them). An item that does not read back
// intact is dropped, counted, and d marked.
func (s *store) pending(d *device) (wires [][]byte, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.currentLocked()
	for _, it := range d.pending {
		if it.gone {
			continue
		}
		var wire []byte
		var err error
		if it.seg == cur && it.off >= cur.written {
			wire, err = readWire(s.buf[it.off-cur.written:][:it.size], d.id, it.seq)
			wire = slices.Clone(wire) // the buffer is reused
		} else {
			rec := make([]byte, it.size)
			if _, err = it.seg.f.ReadAt(rec, it.off); err == nil {
				wire, err = readWire(rec, d.id, it.seq)
			}
		}
		if err != nil {
			s.log.Warn("relay spool: an item does not read back; its device must send it again",
				zap.String("device", d.id), zap.Uint64("seq", it.seq), zap.Error(err))
			s.goneLocked(it)
			s.dropped++
			markLost(d, nil)
			s.settleLocked(it.seg)
			continue
		}
		wires = append(wires, wire)
	}
	return wires, d.lost
}

// clearLost forgets that d lost items: a proxy minion's record, whose
// loss was logged when it happened (the spool held the only copy).
func (s *store) clearLost(d *device) {
	s.mu.Lock()
	d.lost = false
	s.mu.Unlock()
}

// readWire returns the wire frame in rec, which must be the record of
// id's item seq.
func readWire(rec []byte, id string, seq uint64) ([]byte, error) {
	r, n, ok := reclog.Next(rec, maxWireRecord)
	if !ok || n != len(rec) || r.Kind != recWire || r.Seq != seq {
		return nil, errors.New("damaged record")
	}
	dev, wire, ok := splitWire(r.Body)
	if !ok || dev != id {
		return nil, errors.New("damaged record")
	}
	return wire, nil
}

// forget drops d's items (d is gone; it still has them in its spool),
// and a record says so, for a restart not to send what d will send again
// in a session of its own. If resumable (the relay is stopping), d's items
// stay as they are instead, on disk for the next run to send by resuming
// d's session (see resumeOrphans).
func (s *store) forget(d *device, resumable bool) {
	if resumable {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range d.pending {
		if !it.gone {
			s.goneLocked(it)
		}
	}
	for _, it := range d.pending {
		s.settleLocked(it.seg)
	}
	s.settleLocked(s.currentLocked())
	onDisk := false
	for _, it := range d.pending {
		onDisk = onDisk || it.seg != nil
	}
	d.pending = nil
	if onDisk {
		s.logLocked(recForget, 0, d.id)
	}
}

// stats returns the wire bytes and items held and the items ever dropped.
func (s *store) stats() (bytes int64, items int, dropped uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.items, s.dropped
}

// corruptBytes returns the bytes of segments ever dropped as damaged.
func (s *store) corruptBytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.corrupt
}

// usage returns the bytes of segments on disk (the figure spool_max
// bounds) and the items ever dropped because they could not be written.
func (s *store) usage() (disk int64, failed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disk, s.failed
}
