package relay

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
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

// FuzzHelloLog: whatever hello.log holds, a relay opens its spool; each
// device it resumes has a Hello under its own id, and the log it leaves
// holds only those devices' Hellos.
func FuzzHelloLog(f *testing.F) {
	var log []byte
	for _, id := range []string{"a", "b", "a"} {
		wire, err := protocol.Encode(&protocol.Hello{ID: id, Version: "1"})
		if err != nil {
			f.Fatal(err)
		}
		log = appendHello(log, id, wire)
	}
	f.Add(log)
	f.Add(log[:len(log)-4])
	f.Add(appendHello(nil, "a", []byte("not cbor")))
	wrong, _ := protocol.Encode(&protocol.Hello{ID: "b"})
	f.Add(appendHello(nil, "a", wrong)) // a's record, b's Hello
	f.Add(reclog.Append(nil, recHello, 0, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}))
	for _, i := range []int{0, 3, 9, 17, len(log) / 2} {
		b := bytes.Clone(log)
		b[i] ^= 0x20
		f.Add(b)
	}
	a, b := &device{id: "a"}, &device{id: "b"}
	var seg []byte
	for seq := uint64(1); seq <= 2; seq++ {
		seg = appendWire(seg, "a", seq, wireOf(a, seq, 40))
		seg = appendWire(seg, "b", seq, wireOf(b, seq, 40))
	}
	f.Fuzz(func(t *testing.T, log []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, helloLogName), log, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "0000000000000000"+segSuffix), seg, 0o600); err != nil {
			t.Fatal(err)
		}
		s := newStore(dir, 1<<20, zap.NewNop())
		if err := s.open(); err != nil {
			t.Fatalf("open: %v", err)
		}
		var ids []string
		for _, d := range s.orphanList() {
			if d.hello == nil || d.hello.ID != d.id {
				t.Fatalf("orphan %s resumed with the Hello %+v", d.id, d.hello)
			}
			ids = append(ids, d.id)
		}
		if err := s.close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		slices.Sort(ids)
		if got := loggedHellos(t, dir); !slices.Equal(got, ids) {
			t.Fatalf("the log holds Hellos of %v, the orphans are %v", got, ids)
		}
	})
}
