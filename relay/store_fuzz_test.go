package relay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// FuzzStoreLoad: whatever a previous run's segment holds, a relay opens
// its spool, every item it finds to resume reads back intact, and it
// closes cleanly.
func FuzzStoreLoad(f *testing.F) {
	a := &device{id: "a"}
	var seg []byte
	for seq := uint64(1); seq <= 4; seq++ {
		seg = appendWire(seg, "a", seq, wireOf(a, seq, 40))
		seg = appendWire(seg, "b", seq, []byte("b's"))
	}
	seg = reclog.Append(seg, recAck, 2, []byte("a"))
	seg = appendWire(seg, "a", 5, wireOf(a, 5, 40))
	f.Add(seg)
	f.Add(seg[:len(seg)-7])
	f.Add(appendWire(nil, "a", 1, make([]byte, 300))[:100]) // oversized, torn
	for _, i := range []int{0, 5, 9, 17, len(seg) / 2, len(seg) - 1} {
		b := bytes.Clone(seg)
		b[i] ^= 0x40
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		s := newStore(dir, 1<<20, zap.NewNop())
		if err := os.MkdirAll(filepath.Join(dir, helloDir), 0o700); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"a", "b"} {
			if err := s.saveHello(&device{id: id, hello: &protocol.Hello{ID: id}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "0000000000000000"+segSuffix), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.open(); err != nil {
			t.Fatalf("open: %v", err)
		}
		for _, d := range s.orphanList() {
			if _, lost := s.pending(d); lost {
				t.Fatalf("orphan %s: an item found on load does not read back", d.id)
			}
		}
		if err := s.close(); err != nil {
			t.Fatalf("close: %v", err)
		}
	})
}
