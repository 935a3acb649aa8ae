package relay

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStore(t *testing.T) {
	s := &store{max: 10}
	a, b := &device{id: "a"}, &device{id: "b"}
	put := func(d *device, seq uint64, n int) []*device {
		t.Helper()
		return s.put(d, seq, []byte(fmt.Sprintf("%s%0*d", d.id, n-1, seq)))
	}
	if lost := put(a, 1, 3); lost != nil {
		t.Fatalf("put within max lost %v", lost)
	}
	put(b, 1, 3)
	put(a, 2, 3)
	if got, _ := s.pending(a); !cmp.Equal(got, [][]byte{[]byte("a01"), []byte("a02")}) {
		t.Errorf("pending(a) = %q", got)
	}
	// 9 bytes held; 3 more drop the oldest (a's seq 1).
	lost := put(b, 2, 3)
	if len(lost) != 1 || lost[0] != a {
		t.Fatalf("put past max: lost %v, want [a]", lost)
	}
	if bytes, items, dropped := s.stats(); bytes != 9 || items != 3 || dropped != 1 {
		t.Errorf("stats = %d bytes, %d items, %d dropped; want 9, 3, 1", bytes, items, dropped)
	}
	if got, lostA := s.pending(a); !cmp.Equal(got, [][]byte{[]byte("a02")}) || !lostA {
		t.Errorf("pending(a) = %q, lost %v; want [a02], true", got, lostA)
	}
	s.ack(b, 1)
	if got, _ := s.pending(b); !cmp.Equal(got, [][]byte{[]byte("b02")}) {
		t.Errorf("pending(b) after ack 1 = %q, want [b02]", got)
	}
	s.forget(a)
	s.ack(b, 5)
	if bytes, items, _ := s.stats(); bytes != 0 || items != 0 {
		t.Errorf("after forget and ack: %d bytes, %d items held, want 0", bytes, items)
	}
	if len(s.fifo) != 0 {
		t.Errorf("fifo keeps %d gone items", len(s.fifo))
	}
}
