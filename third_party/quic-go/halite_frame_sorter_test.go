package quic

import (
	"bytes"
	"testing"

	"github.com/quic-go/quic-go/internal/protocol"
)

// Halite's tests of 92-frame-sorter-one-entry.patch (run by make test:
// go test -run Halite github.com/quic-go/quic-go). Upstream's own
// frame_sorter_test.go passes too, with its queue check reading the
// sorter's one entry as well as its map (tools/quicfork/HALITE.md).

// TestHaliteFrameSorterOneEntryNoAlloc: a stream read as it arrives (a
// frame pushed, then popped) allocates nothing in the sorter: upstream's
// map, made again for each frame since 70-idle-connection-memory.patch,
// cost an allocation a frame.
func TestHaliteFrameSorterOneEntryNoAlloc(t *testing.T) {
	s := newFrameSorter()
	data := []byte("a job or a return")
	var off protocol.ByteCount
	step := func() {
		if err := s.Push(data, off, nil); err != nil {
			t.Fatal(err)
		}
		at, got, _ := s.Pop()
		if at != off || !bytes.Equal(got, data) {
			t.Fatalf("Pop at %d: %q at %d", off, got, at)
		}
		off += protocol.ByteCount(len(data))
	}
	step()
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Errorf("push and pop of an in-order frame: %.1f allocations, want 0", n)
	}
	if s.queue != nil || s.hasOne || s.HasMoreData() {
		t.Errorf("after the pops: queue %v, hasOne %v, HasMoreData %v; want empty", s.queue, s.hasOne, s.HasMoreData())
	}
}

// TestHaliteFrameSorterOneEntryToMap: frames out of order move the one
// entry into the map and come out in order; a duplicate of the one entry
// is dropped; the sorter is empty again at the end, holding no map.
func TestHaliteFrameSorterOneEntryToMap(t *testing.T) {
	s := newFrameSorter()
	var doneCalls int
	done := func() { doneCalls++ }
	push := func(data string, off protocol.ByteCount) {
		t.Helper()
		if err := s.Push([]byte(data), off, done); err != nil {
			t.Fatal(err)
		}
	}
	push("world", 5) // one entry, not readable yet
	if !s.hasOne || s.queue != nil {
		t.Fatalf("one frame: hasOne %v, queue %v", s.hasOne, s.queue)
	}
	if at, got, _ := s.Pop(); got != nil || at != 0 {
		t.Fatalf("Pop before offset 0 arrived: %q at %d", got, at)
	}
	push("world", 5) // a duplicate: dropped, its callback called
	if doneCalls != 1 || !s.hasOne {
		t.Fatalf("duplicate: %d callbacks, hasOne %v", doneCalls, s.hasOne)
	}
	push("!", 10)    // a second frame: the map
	push("hello", 0) // the first
	if s.hasOne || len(s.queue) != 3 || s.count() != 3 {
		t.Fatalf("three frames: hasOne %v, queue of %d", s.hasOne, len(s.queue))
	}
	buf := make([]byte, 11)
	if err := s.Peek(0, buf); err != nil || string(buf) != "helloworld!" {
		t.Fatalf("Peek: %q, %v", buf, err)
	}
	var got []byte
	for s.HasMoreData() {
		_, b, cb := s.Pop()
		if b == nil {
			t.Fatal("HasMoreData, but nothing to pop")
		}
		got = append(got, b...)
		if cb != nil {
			cb()
		}
	}
	if string(got) != "helloworld!" {
		t.Errorf("read %q, want helloworld!", got)
	}
	if s.queue != nil || s.hasOne {
		t.Errorf("empty sorter: queue %v, hasOne %v", s.queue, s.hasOne)
	}
	if doneCalls != 4 {
		t.Errorf("%d callbacks, want 4 (three frames and the duplicate)", doneCalls)
	}
}
