package master

import (
	"testing"
)

// TestSessionSendQueue: a session's send queue holds nothing until a frame
// waits, takes sendQueue frames and refuses the next (the caller closes the
// session: "send queue full"), and lets its storage go once the writer has
// taken everything (issue 20: a channel of sendQueue slots was 24 KiB per
// session, thousands of them behind relays).
func TestSessionSendQueue(t *testing.T) {
	s := &session{done: make(chan struct{}), noWriter: true}
	if s.out != nil {
		t.Fatal("a new session holds a queue")
	}
	s.sendMu.Lock()
	for i := range sendQueue {
		if !s.enqueue([]byte{byte(i), 1}) {
			t.Fatalf("frame %d of %d refused", i+1, sendQueue)
		}
	}
	if s.enqueue([]byte{0, 2}) {
		t.Fatalf("frame %d taken: the queue holds %d", sendQueue+1, sendQueue)
	}
	if s.queued != sendQueue {
		t.Fatalf("queued %d, want %d", s.queued, sendQueue)
	}
	s.noWriter = false
	s.sendMu.Unlock()
	// The writer takes them in order (writeOut's own loop needs a stream).
	for i := range sendQueue {
		s.sendMu.Lock()
		b := s.nextOut()
		s.queued--
		s.sendMu.Unlock()
		if b[0] != byte(i) {
			t.Fatalf("frame %d came out as %d", i, b[0])
		}
	}
	if s.out != nil || s.queued != 0 {
		t.Fatalf("after the writer: out %d frames (cap %d), queued %d", len(s.out), cap(s.out), s.queued)
	}
}
