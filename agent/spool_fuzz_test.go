package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// FuzzSpoolLoad: whatever the outbox log holds, opening it neither fails
// nor panics; what it finds waiting is in seq order, below the next seq,
// and is what a restart finds again, with an item pushed meanwhile.
func FuzzSpoolLoad(f *testing.F) {
	var log []byte
	log = reclog.Append(log, recTrim, 4, nil)
	log = reclog.Append(log, recEvent, 5, []byte("five"))
	log = reclog.Append(log, recReturn, 6, []byte("six"))
	log = reclog.Append(log, recTrim, 5, nil)
	log = reclog.Append(log, recEvent, 7, bytes.Repeat([]byte("s"), 40))
	f.Add(log)
	f.Add(log[:len(log)-5])
	f.Add(log[:reclog.HeaderSize-2])
	for _, i := range []int{0, 4, 8, 30, 40, len(log) - 1} {
		b := bytes.Clone(log)
		b[i] ^= 0x08
		f.Add(b)
	}
	f.Add(append(bytes.Clone(log), reclog.Append(nil, recEvent, 8, make([]byte, maxBody+1))[:64]...)) // oversized
	f.Add(reclog.Append(nil, 'z', 1, []byte("unknown kind")))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, spoolFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openSpool(dir, 1<<30, nil)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		got := waiting(s)
		var last uint64
		for _, it := range s.items {
			if it.seq <= last || it.seq >= s.next {
				t.Fatalf("item seq %d after %d, next %d", it.seq, last, s.next)
			}
			last = it.seq
		}
		if reclog.Bytes(s.damage) > len(b) {
			t.Fatalf("damage %v past the log's %d bytes", s.damage, len(b))
		}
		seq, _, err := s.push(protocol.TypeEvent, []byte("new"))
		if err != nil {
			t.Fatalf("push: %v", err)
		}
		want := append(got, waiting(s)[len(got):]...)
		s.close()
		s2, err := openSpool(dir, 1<<30, nil)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.close()
		if d := cmp.Diff(want, waiting(s2)); d != "" {
			t.Fatalf("reopened (-want +got):\n%s", d)
		}
		if len(s2.damage) != 0 || s2.next != seq+1 {
			t.Fatalf("reopened: damage %v, next %d; want none, %d", s2.damage, s2.next, seq+1)
		}
	})
}
