package relay

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/fulldisk"
	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// orphanSeqs opens the store in dir as a restarted relay and returns the
// seqs of what it would resume for device id, and the store.
func orphanSeqs(t *testing.T, dir, id string) ([]uint64, *store) {
	t.Helper()
	s := openTestStore(t, dir, 1<<20, 0)
	var seqs []uint64
	for _, d := range s.orphanList() {
		if d.id != id {
			continue
		}
		wires, lost := s.pending(d)
		if lost {
			t.Errorf("orphan %s: an item found on load did not read back", id)
		}
		for _, w := range wires {
			var seq uint64
			if _, err := fmt.Sscanf(string(w), id+"/%d/", &seq); err != nil {
				t.Fatalf("orphan %s: item %.20q: %v", id, w, err)
			}
			seqs = append(seqs, seq)
		}
	}
	return seqs, s
}

func seqRange(from, to uint64, except ...uint64) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		if !containsSeq(except, i) {
			out = append(out, i)
		}
	}
	return out
}

func containsSeq(s []uint64, x uint64) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestStoreFullDisk: a flush that fails on a full disk after writing part
// of the buffer drops its items (their devices send them again) and cuts
// the segment back, so that a restart neither resumes them (twice
// delivered) nor loses what was written after room came back.
func TestStoreFullDisk(t *testing.T) {
	disk := fulldisk.Mount(t, 512<<10)
	s := newStore(disk.Dir, 1<<20, zap.NewNop())
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	a := &device{id: "a", hello: &protocol.Hello{ID: "a"}}
	if err := s.saveHello(a); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		s.put(a, seq, wireOf(a, seq, 100))
	}
	flush(t, s)
	disk.Fill(4096)
	for seq := uint64(4); seq <= 40; seq++ {
		s.put(a, seq, wireOf(a, seq, 500)) // 18 KiB: more than is left
	}
	s.mu.Lock()
	lost := s.flushLocked(nil)
	s.mu.Unlock()
	if len(lost) != 1 || lost[0] != a {
		t.Fatalf("flush on a full disk: lost %v, want [a]", lost)
	}
	if _, failed := s.usage(); failed != 37 {
		t.Errorf("after the failed flush: %d failed, want 37", failed)
	}
	disk.Free()
	s.put(a, 41, wireOf(a, 41, 100))
	s.forget(a, true)
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	got, s2 := orphanSeqs(t, disk.Dir, "a")
	if d := cmp.Diff([]uint64{1, 2, 3, 41}, got); d != "" {
		t.Errorf("resumed after a failed write (-want +got):\n%s", d)
	}
	if n := s2.corruptBytes(); n != 0 {
		t.Errorf("got %d corrupt bytes, want 0", n)
	}
}

// TestStoreDamage: a damaged record of a segment costs that record, never
// what follows it; the damage is logged and counted.
func TestStoreDamage(t *testing.T) {
	// records lists the offsets of the records of a segment by kind and
	// seq ("w7", "a5").
	records := func(b []byte) map[string][2]int {
		out := make(map[string][2]int)
		reclog.Scan(b, maxWireRecord, func(off, n int, r reclog.Record, _ int) bool {
			out[fmt.Sprintf("%c%d", r.Kind, r.Seq)] = [2]int{off, off + n}
			return true
		})
		for _, k := range []string{"w2", "w8", "w10", "a3"} {
			if _, ok := out[k]; !ok {
				t.Fatalf("no record %s in the segment", k)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		damage func(b []byte, recs map[string][2]int) []byte
		want   []uint64
	}{
		{"bit in an acked item", func(b []byte, r map[string][2]int) []byte { b[r["w2"][0]+30] ^= 1; return b },
			seqRange(4, 20)},
		{"bit in the length of a waiting item", func(b []byte, r map[string][2]int) []byte { b[r["w10"][0]] ^= 4; return b },
			seqRange(4, 20, 10)},
		{"bit in the ack", func(b []byte, r map[string][2]int) []byte { b[r["a3"][1]-1] ^= 1; return b },
			seqRange(1, 20)}, // sent again: at least once
		{"zeroed items", func(b []byte, r map[string][2]int) []byte { clear(b[r["w8"][0]:r["w10"][0]]); return b },
			seqRange(4, 20, 8, 9)},
		{"torn last record", func(b []byte, _ map[string][2]int) []byte { return b[:len(b)-3] },
			seqRange(4, 19)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(dir, 1<<20, zap.NewNop())
			if err := s.open(); err != nil {
				t.Fatal(err)
			}
			a := &device{id: "a", hello: &protocol.Hello{ID: "a"}}
			if err := s.saveHello(a); err != nil {
				t.Fatal(err)
			}
			for seq := uint64(1); seq <= 20; seq++ {
				s.put(a, seq, wireOf(a, seq, 150))
				if seq == 5 {
					flush(t, s)
					s.ack(a, 3)
				}
			}
			s.forget(a, true)
			if err := s.close(); err != nil {
				t.Fatal(err)
			}
			names, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
			if len(names) != 1 {
				t.Fatalf("segments %v, want 1", names)
			}
			b, err := os.ReadFile(names[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(names[0], tt.damage(b, records(b)), 0o600); err != nil {
				t.Fatal(err)
			}
			got, s2 := orphanSeqs(t, dir, "a")
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("resumed (-want +got):\n%s", d)
			}
			if n := s2.corruptBytes(); n == 0 {
				t.Error("got no corrupt bytes counted, want some")
			}
		})
	}
}
