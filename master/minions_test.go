package master

import (
	"testing"

	"go.uber.org/zap/zaptest"
)

// TestRegistryResumedSession: a relayed device's session resumed with the
// same MAC key (the relay replaying its Hello after the link dropped)
// skips what the ended session handled; any other session does not.
func TestRegistryResumedSession(t *testing.T) {
	r, err := newRegistry(t.TempDir(), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	link := &relayLink{id: "r1"}
	sess := func(id string, relay *relayLink, mac string) *session {
		return &session{id: id, relay: relay, mac: []byte(mac), log: log}
	}
	end := func(s *session, seq uint64) {
		r.attach(s)
		s.toAck.Store(seq)
		r.detach(s)
	}

	end(sess("d1", link, "k1"), 7)
	s := sess("d1", link, "k1")
	r.attach(s)
	if s.handled != 7 {
		t.Fatalf("resumed session: handled %d, want 7", s.handled)
	}
	for _, tc := range []struct {
		seq  uint64
		want bool
	}{{0, false}, {3, true}, {7, true}, {8, false}} {
		if got := s.replayed(tc.seq); got != tc.want {
			t.Errorf("replayed(%d): got %v, want %v", tc.seq, got, tc.want)
		}
	}
	if got := s.toAck.Load(); got != 7 {
		t.Errorf("replayed items acknowledged up to %d, want 7", got)
	}
	r.detach(s)

	for _, tc := range []struct {
		name string
		s    *session
	}{
		{"another MAC key (a new device session)", sess("d1", link, "k2")},
		{"a direct session", sess("d1", nil, "k1")},
	} {
		end(sess("d1", link, "k1"), 5)
		r.attach(tc.s)
		if tc.s.handled != 0 {
			t.Errorf("%s: handled %d, want 0", tc.name, tc.s.handled)
		}
		r.detach(tc.s)
	}

	end(sess("d1", link, "k1"), 5)
	r.forget("d1")
	s = sess("d1", link, "k1")
	if r.attach(s); s.handled != 0 {
		t.Errorf("after forget: handled %d, want 0", s.handled)
	}
}
