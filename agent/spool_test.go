package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/internal/fulldisk"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

func openTestSpool(t *testing.T, dir string, max int64, keep func(spoolItem) bool) *spool {
	t.Helper()
	s, err := openSpool(dir, max, keep)
	if err != nil {
		t.Fatalf("openSpool: %v", err)
	}
	t.Cleanup(func() { s.close() })
	return s
}

func mustPush(t *testing.T, s *spool, kind protocol.Type, body string) (uint64, int) {
	t.Helper()
	seq, dropped, err := s.push(kind, []byte(body))
	if err != nil {
		t.Fatalf("push %q: %v", body, err)
	}
	return seq, dropped
}

// waiting lists the bodies that wait, oldest first, as the writer sees them.
func waiting(s *spool) []string {
	var out []string
	for seq := uint64(0); ; {
		it, ok := s.after(seq)
		if !ok {
			return out
		}
		out = append(out, fmt.Sprintf("%d:%s:%s", it.seq, it.kind, it.body))
		seq = it.seq
	}
}

func TestSpoolOrderAndAck(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 1<<20, nil)
	for i, body := range []string{"r1", "e2", "r3", "e4"} {
		kind := protocol.TypeReturn
		if body[0] == 'e' {
			kind = protocol.TypeEvent
		}
		if seq, _ := mustPush(t, s, kind, body); seq != uint64(i+1) {
			t.Errorf("push %s: got seq %d, want %d", body, seq, i+1)
		}
	}
	steps := []struct {
		name string
		ack  uint64
		want []string
	}{
		{"nothing acked", 0, []string{"1:return:r1", "2:event:e2", "3:return:r3", "4:event:e4"}},
		{"ack 2", 2, []string{"3:return:r3", "4:event:e4"}},
		{"stale ack", 1, []string{"3:return:r3", "4:event:e4"}},
		{"ack all", 4, nil},
	}
	for _, st := range steps {
		if err := s.ack(st.ack); err != nil {
			t.Fatalf("%s: ack: %v", st.name, err)
		}
		if d := cmp.Diff(st.want, waiting(s)); d != "" {
			t.Errorf("%s: waiting (-want +got):\n%s", st.name, d)
		}
	}
	if s.bytes != 0 || s.len() != 0 {
		t.Errorf("after acking all: got %d items, %d bytes, want none", s.len(), s.bytes)
	}
}

func TestSpoolBound(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 10, nil)
	steps := []struct {
		body    string
		dropped int
		want    []string
	}{
		{"aaaa", 0, []string{"1:event:aaaa"}},
		{"bbbb", 0, []string{"1:event:aaaa", "2:event:bbbb"}},
		{"cc", 0, []string{"1:event:aaaa", "2:event:bbbb", "3:event:cc"}},
		{"d", 1, []string{"2:event:bbbb", "3:event:cc", "4:event:d"}},
		// Larger than the bound alone: kept, everything older dropped.
		{"eeeeeeeeeeee", 3, []string{"5:event:eeeeeeeeeeee"}},
		{"f", 1, []string{"6:event:f"}},
	}
	for _, st := range steps {
		_, dropped := mustPush(t, s, protocol.TypeEvent, st.body)
		if dropped != st.dropped {
			t.Errorf("push %s: got %d dropped, want %d", st.body, dropped, st.dropped)
		}
		if d := cmp.Diff(st.want, waiting(s)); d != "" {
			t.Errorf("after push %s: waiting (-want +got):\n%s", st.body, d)
		}
	}
}

// TestSpoolRestart: what waits survives a close (or a crash: nothing is
// closed before reopening), acks and drops too, the sequence goes on, and
// a torn last record is dropped.
func TestSpoolRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 16, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"one", "two", "three", "four"} {
		mustPush(t, s, protocol.TypeReturn, b)
	}
	mustPush(t, s, protocol.TypeEvent, "five") // drops "one"
	if err := s.ack(2); err != nil {
		t.Fatal(err)
	}
	want := []string{"3:return:three", "4:return:four", "5:event:five"}
	if d := cmp.Diff(want, waiting(s)); d != "" {
		t.Fatalf("before restart: waiting (-want +got):\n%s", d)
	}
	// Not closed: as after a crash.
	s2 := openTestSpool(t, dir, 16, nil)
	if d := cmp.Diff(want, waiting(s2)); d != "" {
		t.Errorf("after restart: waiting (-want +got):\n%s", d)
	}
	s.close()
	if seq, _ := mustPush(t, s2, protocol.TypeEvent, "six"); seq != 6 {
		t.Errorf("first push after restart: got seq %d, want 6", seq)
	}
	if err := s2.ack(6); err != nil {
		t.Fatal(err)
	}
	s2.close()

	// Everything acked: the sequence still goes on after a restart.
	s3 := openTestSpool(t, dir, 16, nil)
	if n := s3.len(); n != 0 {
		t.Errorf("after acking all and reopening: got %d items, want 0", n)
	}
	if seq, _ := mustPush(t, s3, protocol.TypeReturn, "seven"); seq != 7 {
		t.Errorf("push after reopening an empty spool: got seq %d, want 7", seq)
	}
	mustPush(t, s3, protocol.TypeReturn, "eight")
	s3.close()

	// A crash in the middle of the last write.
	path := filepath.Join(dir, spoolFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	s4 := openTestSpool(t, dir, 16, nil)
	if d := cmp.Diff([]string{"7:return:seven"}, waiting(s4)); d != "" {
		t.Errorf("after a torn write: waiting (-want +got):\n%s", d)
	}
	if seq, _ := mustPush(t, s4, protocol.TypeReturn, "again"); seq != 8 {
		t.Errorf("push after a torn write: got seq %d, want 8", seq)
	}
}

func TestSpoolKeepAndCompact(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 64<<10)
	const n = 40 // 2.5 MiB of items: acking them compacts the log
	for range n {
		if _, _, err := s.push(protocol.TypeReturn, big); err != nil {
			t.Fatal(err)
		}
	}
	mustPush(t, s, protocol.TypeEvent, "mine")
	mustPush(t, s, protocol.TypeEvent, "theirs")
	if err := s.ack(n); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, spoolFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 1024 {
		t.Errorf("log after acking %d large items: got %d bytes, want it compacted", n, fi.Size())
	}
	s.close()
	s2 := openTestSpool(t, dir, 1<<30, func(it spoolItem) bool { return string(it.body) != "theirs" })
	if d := cmp.Diff([]string{fmt.Sprintf("%d:event:mine", n+1)}, waiting(s2)); d != "" {
		t.Errorf("after reopening with a filter: waiting (-want +got):\n%s", d)
	}
}

// TestSpoolFullDisk: a push that fails on a full disk, after writing part
// of its record, reports the failure and leaves nothing behind, so that
// what is pushed once there is room again survives a restart. Acks on the
// full disk cost nothing but their record.
func TestSpoolFullDisk(t *testing.T) {
	disk := fulldisk.Mount(t, 256<<10)
	s, err := openSpool(disk.Dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustPush(t, s, protocol.TypeEvent, "before")
	disk.Fill(8 << 10)
	big := strings.Repeat("x", 20<<10) // more than is left: written in part
	if _, _, err := s.push(protocol.TypeEvent, []byte(big)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("push on a full disk: got %v, want ENOSPC", err)
	}
	if _, _, err := s.push(protocol.TypeEvent, []byte(big)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("second push on a full disk: got %v, want ENOSPC", err)
	}
	disk.Free()
	var want []string
	want = append(want, "1:event:before")
	for i := range 10 {
		body := fmt.Sprintf("after%d", i)
		seq, _ := mustPush(t, s, protocol.TypeEvent, body)
		want = append(want, fmt.Sprintf("%d:event:%s", seq, body))
	}
	if err := s.ack(1); err != nil {
		t.Fatal(err)
	}
	want = want[1:]
	// Not closed: as after a crash.
	s2 := openTestSpool(t, disk.Dir, 1<<30, nil)
	s.close()
	if d := cmp.Diff(want, waiting(s2)); d != "" {
		t.Errorf("after a failed push and a restart: waiting (-want +got):\n%s", d)
	}
	if n := reclog.Bytes(s2.damage); n != 0 {
		t.Errorf("after a failed push and a restart: got %d bytes of damage, want none", n)
	}
}

// TestSpoolFullDiskOpen: a spool opened on a full disk (its compaction
// cannot write) works on the log as it is.
func TestSpoolFullDiskOpen(t *testing.T) {
	disk := fulldisk.Mount(t, 256<<10)
	s, err := openSpool(disk.Dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"one", "two", "three"} {
		mustPush(t, s, protocol.TypeReturn, b)
	}
	s.ack(1)
	s.close()
	disk.Fill(0)
	s2 := openTestSpool(t, disk.Dir, 1<<30, nil)
	want := []string{"2:return:two", "3:return:three"}
	if d := cmp.Diff(want, waiting(s2)); d != "" {
		t.Errorf("opened on a full disk: waiting (-want +got):\n%s", d)
	}
	disk.Free()
	mustPush(t, s2, protocol.TypeReturn, "four")
	s2.close()
	s3 := openTestSpool(t, disk.Dir, 1<<30, nil)
	if d := cmp.Diff(append(want, "4:return:four"), waiting(s3)); d != "" {
		t.Errorf("after room again: waiting (-want +got):\n%s", d)
	}
}

// spoolRecords writes items one to n (and acks up to acked), closes the
// spool and returns the offset of each record in its log.
func spoolRecords(t *testing.T, dir string, n int, acked uint64) (path string, offs map[uint64]int) {
	t.Helper()
	s, err := openSpool(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, spoolFile)
	offs = make(map[uint64]int)
	for i := 1; i <= n; i++ {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		offs[uint64(i)] = int(fi.Size())
		mustPush(t, s, protocol.TypeEvent, fmt.Sprintf("event %02d", i))
		if uint64(i) == acked {
			if err := s.ack(acked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	return path, offs
}

// TestSpoolDamage: a damaged record costs that record, never what follows
// it, and an acknowledged one is not sent again.
func TestSpoolDamage(t *testing.T) {
	seqs := func(from, to int, except ...int) []string {
		var out []string
	next:
		for i := from; i <= to; i++ {
			for _, e := range except {
				if i == e {
					continue next
				}
			}
			out = append(out, fmt.Sprintf("%d:event:event %02d", i, i))
		}
		return out
	}
	tests := []struct {
		name    string
		damage  func(b []byte, offs map[uint64]int) []byte
		want    []string
		corrupt bool
	}{
		{"bit in an acked record", func(b []byte, offs map[uint64]int) []byte {
			b[offs[3]+reclog.HeaderSize+2] ^= 0x20
			return b
		}, seqs(6, 25), true},
		{"bit in the length of a waiting record", func(b []byte, offs map[uint64]int) []byte {
			b[offs[10]] ^= 0x01
			return b
		}, seqs(6, 25, 10), true},
		{"bit in the trim record", func(b []byte, offs map[uint64]int) []byte {
			b[offs[6]-1] ^= 0x80 // the trim record ends where item 6 starts
			return b
		}, seqs(1, 25), true},
		{"zeroed page", func(b []byte, offs map[uint64]int) []byte {
			clear(b[offs[8]:offs[12]])
			return b
		}, seqs(6, 25, 8, 9, 10, 11), true},
		{"torn last record", func(b []byte, offs map[uint64]int) []byte {
			return b[:len(b)-3]
		}, seqs(6, 24), true},
		{"intact", func(b []byte, _ map[uint64]int) []byte { return b }, seqs(6, 25), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path, offs := spoolRecords(t, dir, 25, 5)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.damage(b, offs), 0o600); err != nil {
				t.Fatal(err)
			}
			s := openTestSpool(t, dir, 1<<30, nil)
			if d := cmp.Diff(tt.want, waiting(s)); d != "" {
				t.Errorf("waiting (-want +got):\n%s", d)
			}
			if got := reclog.Bytes(s.damage) > 0; got != tt.corrupt {
				t.Errorf("got damage %v, want damage %v", s.damage, tt.corrupt)
			}
			// A torn last item was never written: its seq is the next one.
			next := uint64(26)
			if tt.name == "torn last record" {
				next = 25
			}
			if seq, _ := mustPush(t, s, protocol.TypeEvent, "next"); seq != next {
				t.Errorf("push after reopening: got seq %d, want %d", seq, next)
			}
			// The damage is gone with the first compaction: no report twice.
			s.close()
			if s2 := openTestSpool(t, dir, 1<<30, nil); reclog.Bytes(s2.damage) != 0 {
				t.Errorf("reopened again: got damage %v, want none", s2.damage)
			}
		})
	}
}

// TestSpoolForgedRecord: a record inside an event's body, found when the
// header of that event's record is damaged, cannot jump the sequence to
// trim or shadow what follows.
func TestSpoolForgedRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustPush(t, s, protocol.TypeEvent, "first")
	forged := reclog.Append(nil, recTrim, 1000, nil)
	forged = reclog.Append(forged, recEvent, 1001, []byte("forged"))
	mustPush(t, s, protocol.TypeEvent, "x"+string(forged))
	mustPush(t, s, protocol.TypeEvent, "third")
	s.close()
	path := filepath.Join(dir, spoolFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("first")) + len("first")
	b[at] ^= 0x01 // the length of the second record
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openTestSpool(t, dir, 1<<30, nil)
	if d := cmp.Diff([]string{"1:event:first", "3:event:third"}, waiting(s2)); d != "" {
		t.Errorf("waiting (-want +got):\n%s", d)
	}
}
