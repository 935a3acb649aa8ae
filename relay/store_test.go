package relay

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/protocol"
)

// openTestStore opens a store in dir of at most max bytes, with segments
// of segMax bytes (0: the default); it is closed when the test ends.
func openTestStore(t *testing.T, dir string, max, segMax int64) *store {
	t.Helper()
	s := newStore(dir, max, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	if segMax > 0 {
		s.segMax = segMax
	}
	if err := s.open(); err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

// wireOf is a recognisable wire frame of n bytes for d's item seq.
func wireOf(d *device, seq uint64, n int) []byte {
	w := fmt.Appendf(nil, "%s/%d/", d.id, seq)
	for len(w) < n {
		w = append(w, byte('a'+len(w)%26))
	}
	return w[:n]
}

// flush writes the store's buffer now.
func flush(t *testing.T, s *store) {
	t.Helper()
	s.mu.Lock()
	lost := s.flushLocked(nil)
	s.mu.Unlock()
	if len(lost) > 0 {
		t.Fatalf("flush lost items of %d devices", len(lost))
	}
}

// segFiles lists the segment files in dir and their sizes.
func segFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	files := make(map[string]int64)
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(n)] = fi.Size()
	}
	return files
}

func pendingOf(t *testing.T, s *store, d *device) ([][]byte, bool) {
	t.Helper()
	return s.pending(d)
}

// TestStore: items come back per device in order, from the write buffer
// and from the files alike; acks and forget remove them.
func TestStore(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 1<<20, 0)
	a, b := &device{id: "a"}, &device{id: "b"}
	var wantA, wantB [][]byte
	for seq := uint64(1); seq <= 5; seq++ {
		for _, d := range []*device{a, b} {
			w := wireOf(d, seq, 100+int(seq))
			if lost := s.put(d, seq, w); lost != nil {
				t.Fatalf("put within max lost %v", lost)
			}
			if d == a {
				wantA = append(wantA, w)
			} else {
				wantB = append(wantB, w)
			}
		}
		if seq == 3 {
			flush(t, s) // 1 to 3 in the file, 4 and 5 in the buffer
		}
	}
	if got, lost := pendingOf(t, s, a); !cmp.Equal(got, wantA) || lost {
		t.Errorf("pending(a) = %q, %v; want %q, false", got, lost, wantA)
	}
	s.ack(b, 2)
	if got, _ := pendingOf(t, s, b); !cmp.Equal(got, wantB[2:]) {
		t.Errorf("pending(b) after ack 2 = %q, want %q", got, wantB[2:])
	}
	flush(t, s)
	if got, _ := pendingOf(t, s, a); !cmp.Equal(got, wantA) {
		t.Errorf("pending(a) after flush = %q, want %q", got, wantA)
	}
	if bytes, items, dropped := s.stats(); bytes != 101+102+103+104+105+103+104+105 || items != 8 || dropped != 0 {
		t.Errorf("stats = %d bytes, %d items, %d dropped; want %d, 8, 0", bytes, items, dropped, 101+102+103+104+105+103+104+105)
	}
	s.forget(a, false)
	s.ack(b, 5)
	if bytes, items, _ := s.stats(); bytes != 0 || items != 0 {
		t.Errorf("after forget and ack: %d bytes, %d items held, want 0", bytes, items)
	}
	if got, _ := pendingOf(t, s, a); got != nil {
		t.Errorf("pending(a) after forget = %q, want none", got)
	}
}

// TestStoreBound: past max bytes of segments, the oldest segment is
// dropped whole, its items counted and their devices marked lost; the
// others keep theirs.
func TestStoreBound(t *testing.T) {
	dir := t.TempDir()
	a, b, c := &device{id: "a"}, &device{id: "b"}, &device{id: "c"}
	rec := int64(wireRecordSize("a", wireOf(a, 1, 200)))
	// Segments of 4 records, at most 3 segments.
	s := openTestStore(t, dir, 12*rec, 4*rec)
	put := func(d *device, seq uint64) []*device {
		t.Helper()
		return s.put(d, seq, wireOf(d, seq, 200))
	}
	// Segment 1: a1 b1 a2 b2; segment 2: c1..c4; segment 3: c5..c8.
	put(a, 1)
	put(b, 1)
	put(a, 2)
	put(b, 2)
	for seq := uint64(1); seq <= 8; seq++ {
		if lost := put(c, seq); lost != nil {
			t.Fatalf("put c%d within max lost %v", seq, lost)
		}
	}
	s.ack(b, 1) // not logged: it would be past max
	if disk, _ := s.usage(); disk != 12*rec {
		t.Fatalf("disk = %d, want %d (3 segments)", disk, 12*rec)
	}
	// A 4th segment is one too many: the first goes, with a1, a2, b2.
	lost := put(c, 9)
	slices.SortFunc(lost, func(x, y *device) int { return strings.Compare(x.id, y.id) })
	if len(lost) != 2 || lost[0] != a || lost[1] != b {
		t.Fatalf("put past max lost %v, want [a b]", lost)
	}
	if bytes, items, dropped := s.stats(); bytes != 9*200 || items != 9 || dropped != 3 {
		t.Errorf("stats = %d bytes, %d items, %d dropped; want %d, 9, 3", bytes, items, dropped, 9*200)
	}
	if got, lostA := pendingOf(t, s, a); got != nil || !lostA {
		t.Errorf("pending(a) = %q, lost %v; want none, true", got, lostA)
	}
	got, lostC := pendingOf(t, s, c)
	if len(got) != 9 || lostC {
		t.Errorf("pending(c) = %d items, lost %v; want 9, false", len(got), lostC)
	}
	for i, w := range got {
		if want := wireOf(c, uint64(i+1), 200); !bytes.Equal(w, want) {
			t.Errorf("pending(c)[%d] = %q, want %q", i, w, want)
		}
	}
	flush(t, s)
	if files := segFiles(t, dir); len(files) != 3 {
		t.Errorf("segment files %v, want 3", files)
	}
	if disk, _ := s.usage(); disk > s.max {
		t.Errorf("disk = %d, past max %d", disk, s.max)
	}
}

// TestStoreSegmentsDeleted: a segment whose items are all acked or
// forgotten leaves the disk; the one being written is emptied.
func TestStoreSegmentsDeleted(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1<<20, 4096)
	devs := []*device{{id: "a"}, {id: "b"}, {id: "c"}}
	for seq := uint64(1); seq <= 40; seq++ {
		for _, d := range devs {
			s.put(d, seq, wireOf(d, seq, 300))
		}
		if seq%7 == 0 {
			flush(t, s)
		}
	}
	flush(t, s)
	if files := segFiles(t, dir); len(files) < 4 {
		t.Fatalf("segment files %v, want several", files)
	}
	s.ack(devs[0], 40)
	s.forget(devs[1], false)
	s.ack(devs[2], 20)
	flush(t, s)
	// 12 records a segment, c's 21..40 are in segments 6 to 10; the
	// older ones, holding only a's, b's and c's first items, are gone.
	files := segFiles(t, dir)
	if len(files) != 5 {
		t.Errorf("segment files %v after acks, want the newest 5", files)
	}
	var disk int64
	for _, n := range files {
		disk += n
	}
	if got, _ := s.usage(); got != disk {
		t.Errorf("usage says %d bytes on disk, the files hold %d", got, disk)
	}
	s.ack(devs[2], 40)
	flush(t, s)
	files = segFiles(t, dir)
	if len(files) > 1 {
		t.Errorf("segment files %v after every ack, want at most the one being written", files)
	}
	for name, size := range files {
		if size != 0 {
			t.Errorf("segment %s holds %d bytes after every ack, want it emptied", name, size)
		}
	}
	if disk, _ := s.usage(); disk != 0 {
		t.Errorf("usage says %d bytes on disk, want 0", disk)
	}
}

// TestStoreRestart: what a previous run left (closed cleanly, or crashed
// with a torn last record) is counted as dropped and deleted.
func TestStoreRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(dir, 1<<20, zap.NewNop())
			s.segMax = 2048
			if err := s.open(); err != nil {
				t.Fatal(err)
			}
			a, b := &device{id: "a"}, &device{id: "b"}
			for seq := uint64(1); seq <= 10; seq++ {
				s.put(a, seq, wireOf(a, seq, 250))
				s.put(b, seq, wireOf(b, seq, 250))
			}
			s.ack(a, 4)       // logged: 6 of a's wait
			s.ack(b, 10)      // b's are all gone
			s.put(b, 11, nil) // and one more
			want := 6 + 1
			if crash {
				// The last record (b's 11) is torn: the files as a crash
				// mid-write leaves them.
				flush(t, s)
				s.mu.Lock()
				cur := s.currentLocked()
				if err := cur.f.Truncate(cur.written - 3); err != nil {
					t.Fatal(err)
				}
				s.mu.Unlock()
				want = 6
			}
			if err := s.close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if len(segFiles(t, dir)) == 0 {
				t.Fatal("close left no segment files")
			}
			s2 := openTestStore(t, dir, 1<<20, 2048)
			if bytes, items, dropped := s2.stats(); bytes != 0 || items != 0 || dropped != uint64(want) {
				t.Errorf("after restart: %d bytes, %d items, %d dropped; want 0, 0, %d", bytes, items, dropped, want)
			}
			if files := segFiles(t, dir); len(files) != 0 {
				t.Errorf("segment files %v after restart, want none", files)
			}
			// The new run's segments do not reuse the old names.
			c := &device{id: "c"}
			s2.put(c, 1, wireOf(c, 1, 10))
			if got, _ := pendingOf(t, s2, c); len(got) != 1 {
				t.Errorf("pending(c) after restart = %q, want 1 item", got)
			}
		})
	}
}

// TestStoreWriteFailure: an item that cannot be written is dropped and
// counted, its device marked lost and told (from the flusher), and the
// store goes on.
func TestStoreWriteFailure(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1<<20, 0)
	told := make(chan []*device, 4)
	s.onLost = func(l []*device) { told <- l }
	a, b := &device{id: "a"}, &device{id: "b"}
	s.put(a, 1, wireOf(a, 1, 100))
	flush(t, s)
	s.mu.Lock()
	s.currentLocked().f.Close() // as good as a full disk
	s.mu.Unlock()
	s.put(b, 1, wireOf(b, 1, 100))
	var lost []*device
	select {
	case lost = <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the flusher did not report the failed write")
	}
	if len(lost) != 1 || lost[0] != b {
		t.Errorf("lost %v, want [b]", lost)
	}
	if _, items, dropped := s.stats(); items != 1 || dropped != 1 {
		t.Errorf("stats: %d items, %d dropped; want 1, 1", items, dropped)
	}
	if _, failed := s.usage(); failed != 1 {
		t.Errorf("failed = %d, want 1", failed)
	}
	if got, lostB := pendingOf(t, s, b); got != nil || !lostB {
		t.Errorf("pending(b) = %q, %v; want none, true", got, lostB)
	}
	// a's item, written before, is there, though its file no longer reads:
	// pending drops it and marks a.
	if got, lostA := pendingOf(t, s, a); got != nil || !lostA {
		t.Errorf("pending(a) = %q, %v; want none, true (unreadable)", got, lostA)
	}
	// A fresh segment works again.
	s.mu.Lock()
	_, l, err := s.rotateLocked(nil)
	s.mu.Unlock()
	if err != nil || l != nil {
		t.Fatalf("rotate: %v, lost %v", err, l)
	}
	c := &device{id: "c"}
	s.put(c, 1, wireOf(c, 1, 100))
	flush(t, s)
	if got, lostC := pendingOf(t, s, c); len(got) != 1 || lostC {
		t.Errorf("pending(c) = %q, %v; want 1 item, false", got, lostC)
	}
}

// TestStoreFlushes: the flusher writes the buffer within flushDelay of a
// put, without being asked.
func TestStoreFlushes(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1<<20, 0)
	a := &device{id: "a"}
	s.put(a, 1, wireOf(a, 1, 100))
	testwait.For(t, 10*time.Second, "the buffer to reach the file", func() bool {
		for _, size := range segFiles(t, dir) {
			if size > 0 {
				return true
			}
		}
		return false
	})
}

// TestStoreMemory: the wire bytes go to disk, not the heap: 20 MiB of
// items cost the heap a small index.
func TestStoreMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20 MiB")
	}
	s := openTestStore(t, t.TempDir(), 64<<20, 0)
	devs := make([]*device, 1024)
	for i := range devs {
		devs[i] = &device{id: fmt.Sprintf("device-%04d", i)}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	const n, size = 20 << 10, 1 << 10 // 20 MiB
	for i := range n {
		d := devs[i%len(devs)]
		seq := uint64(i/len(devs) + 1)
		if lost := s.put(d, seq, wireOf(d, seq, size)); lost != nil {
			t.Fatalf("put lost %v", lost)
		}
	}
	after := heap()
	if bytes, items, _ := s.stats(); bytes != n*size || items != n {
		t.Fatalf("stats: %d bytes, %d items; want %d, %d", bytes, items, n*size, n)
	}
	// The index is about 100 bytes an item (2 MiB), the buffer 64 KiB.
	grew := int64(after) - int64(before)
	t.Logf("the heap grew by %d bytes for %d bytes of items", grew, n*size)
	if grew > 6<<20 {
		t.Errorf("the heap grew by %d bytes for %d bytes of items, want far less", grew, n*size)
	}
	runtime.KeepAlive(devs)
	// And they read back from disk.
	got, _ := pendingOf(t, s, devs[7])
	if len(got) != n/len(devs) || !bytes.Equal(got[3], wireOf(devs[7], 4, size)) {
		t.Errorf("pending(devs[7]) = %d items, want %d as put", len(got), n/len(devs))
	}
}

// BenchmarkStorePutAck: devices put 200-byte items and the master acks
// each once the other devices have put one too (one item in flight per
// device), as when a relay's devices answer a job.
func BenchmarkStorePutAck(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			s := newStore(b.TempDir(), 64<<20, zap.NewNop())
			if err := s.open(); err != nil {
				b.Fatal(err)
			}
			defer s.close()
			devs := make([]*device, n)
			for i := range devs {
				devs[i] = &device{id: fmt.Sprintf("device-%05d", i)}
			}
			wire := bytes.Repeat([]byte{'x'}, 200)
			b.SetBytes(int64(len(wire)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				d := devs[i%n]
				seq := uint64(i/n + 1)
				if seq > 1 {
					s.ack(d, seq-1)
				}
				s.put(d, seq, wire)
				i++
			}
		})
	}
}

// TestStoreOpenError: a spool directory that cannot be made is an error
// that names it, from the store and from the relay's Run.
func TestStoreOpenError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "relay-spool")
	err := newStore(dir, 1<<20, zap.NewNop()).open()
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("open under a file: %v, want an error naming %s", err, dir)
	}

	cfg := config.DefaultAgent()
	cfg.ID, cfg.Master, cfg.CacheDir = "r1", []string{"127.0.0.1:1"}, file
	cfg.Relay = config.DefaultRelay()
	ident, _, err := protocol.LoadOrCreateIdentity(filepath.Join(t.TempDir(), "pki"), "minion")
	if err != nil {
		t.Fatal(err)
	}
	// New reads the run-time proxy minions kept in the cachedir, Run opens
	// the spool: whichever meets the unusable cachedir first says so,
	// naming the path.
	r, err := New(Options{Config: cfg, Identity: ident, Log: zap.NewNop(), Listen: "127.0.0.1:0"})
	if err == nil {
		err = r.Run(t.Context())
	}
	if err == nil || !strings.Contains(err.Error(), file+string(filepath.Separator)) {
		t.Errorf("a relay with an unusable cachedir: %v, want an error naming a path under %s", err, file)
	}
}

// TestStoreRandom puts, acks, forgets, flushes and reads back at random,
// with small segments and a small bound, and checks after each step that
// the store's accounts agree with the files and with what each device
// put: a device that lost nothing gets back exactly what it put and was
// not acked; one that lost items gets back a part of it, in order.
func TestStoreRandom(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { testStoreRandom(t, seed) })
	}
}

func testStoreRandom(t *testing.T, seed uint64) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 8<<10, 2<<10)
	rng := rand.New(rand.NewPCG(seed, 2))
	type want struct {
		next  uint64
		wires [][]byte // put and not acked, oldest first
	}
	devs := make([]*device, 6)
	wants := make([]*want, len(devs))
	fresh := func(i int) {
		devs[i] = &device{id: fmt.Sprintf("dev%d", i)}
		wants[i] = &want{next: 1}
	}
	for i := range devs {
		fresh(i)
	}
	for step := range 3000 {
		i := rng.IntN(len(devs))
		d, w := devs[i], wants[i]
		switch op := rng.IntN(10); {
		case op < 6:
			wire := wireOf(d, w.next, 20+rng.IntN(400))
			s.put(d, w.next, wire)
			w.wires = append(w.wires, wire)
			w.next++
		case op < 8 && len(w.wires) > 0:
			k := rng.IntN(len(w.wires)) + 1
			s.ack(d, w.next-uint64(len(w.wires))+uint64(k)-1)
			w.wires = w.wires[k:]
		case op < 9:
			s.forget(d, false)
			fresh(i)
			d, w = devs[i], wants[i]
		default:
			flush(t, s)
		}
		got, lost := s.pending(d)
		if !lost && !slices.EqualFunc(got, w.wires, bytes.Equal) {
			t.Fatalf("step %d: pending(%s) = %d items, want %d", step, d.id, len(got), len(w.wires))
		}
		for _, g := range got {
			for len(w.wires) > 0 && !bytes.Equal(w.wires[0], g) {
				w.wires = w.wires[1:] // dropped
			}
			if len(w.wires) == 0 {
				t.Fatalf("step %d: pending(%s) returned %q, not put or out of order", step, d.id, g)
			}
			w.wires = w.wires[1:]
		}
		w.wires = got // what the device's session would send again
		if lost {
			s.forget(d, false) // the device is disconnected
			fresh(i)
		}
		s.mu.Lock()
		var disk int64
		items := 0
		for _, seg := range s.segs {
			disk += seg.size
			items += seg.live
		}
		sdisk, sitems, nsegs := s.disk, s.items, len(s.segs)
		s.mu.Unlock()
		if disk != sdisk || items != sitems {
			t.Fatalf("step %d: segments hold %d bytes and %d items, the store says %d and %d", step, disk, items, sdisk, sitems)
		}
		if sdisk > s.max && nsegs > 1 {
			t.Fatalf("step %d: %d bytes in %d segments, past max %d", step, sdisk, nsegs, s.max)
		}
	}
	if _, _, dropped := s.stats(); dropped == 0 {
		t.Error("nothing dropped: the test does not reach the bound")
	}
	flush(t, s)
	var files int64
	for _, size := range segFiles(t, dir) {
		files += size
	}
	if disk, _ := s.usage(); disk != files {
		t.Errorf("the store says %d bytes on disk, the files hold %d", disk, files)
	}
}

// TestStoreResume: a restarted store gives back, as orphans, the items
// never acknowledged of devices whose Hello it kept and that had not left;
// the others are counted as dropped (no Hello) or forgotten (left).
func TestStoreResume(t *testing.T) {
	dir := t.TempDir()
	s := newStore(dir, 1<<20, zap.NewNop())
	s.segMax = 1024
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	a := &device{id: "a", hello: &protocol.Hello{ID: "a", Version: "1", Caps: protocol.CapabilityVersion}}
	b := &device{id: "b", hello: &protocol.Hello{ID: "b"}}
	c := &device{id: "c"}
	for _, d := range []*device{a, b} {
		if err := s.saveHello(d); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 5; seq++ {
		for _, d := range []*device{a, b, c} {
			s.put(d, seq, wireOf(d, seq, 150))
		}
	}
	s.ack(a, 2)
	s.forget(b, false) // b left: it sends its items itself
	s.forget(a, true)  // the relay stops
	s.forget(c, true)
	if err := s.close(); err != nil {
		t.Fatal(err)
	}

	s2 := openTestStore(t, dir, 1<<20, 1024)
	orphans := s2.orphanList()
	if len(orphans) != 1 || orphans[0].id != "a" || orphans[0].hello.Version != "1" {
		t.Fatalf("orphans %v, want a with its Hello", orphans)
	}
	oa := orphans[0]
	got, lost := s2.pending(oa)
	if want := [][]byte{wireOf(a, 3, 150), wireOf(a, 4, 150), wireOf(a, 5, 150)}; !cmp.Equal(got, want) || lost {
		t.Errorf("pending(orphan a) = %q, %v; want %q, false", got, lost, want)
	}
	if _, items, dropped := s2.stats(); items != 3 || dropped != 5 {
		t.Errorf("after restart: %d items, %d dropped; want 3 (a's), 5 (c's)", items, dropped)
	}
	if ids := loggedHellos(t, dir); !cmp.Equal(ids, []string{"a"}) {
		t.Errorf("Hellos in the log after the restart: %v, want [a]: b's deleted, nothing to resume", ids)
	}
	// New items go to new segments, beside the old ones.
	d := &device{id: "d"}
	s2.put(d, 1, wireOf(d, 1, 100))
	if got, _ := s2.pending(d); len(got) != 1 {
		t.Errorf("pending(d) = %q, want 1 item", got)
	}
	s2.ack(oa, 4)
	if got := s2.lastSeq(oa); got != 5 {
		t.Errorf("lastSeq(orphan a) = %d, want 5", got)
	}
	s2.abandon(oa)
	if _, items, dropped := s2.stats(); items != 1 || dropped != 6 || len(s2.orphanList()) != 0 {
		t.Errorf("after abandon: %d items, %d dropped, %d orphans; want 1, 6, 0", items, dropped, len(s2.orphanList()))
	}
	flush(t, s2)
	if files := segFiles(t, dir); len(files) != 1 {
		t.Errorf("segment files %v, want only the new one", files)
	}
}
