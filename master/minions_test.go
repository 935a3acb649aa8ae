package master

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/protocol"
)

// TestRegistryResumedSession: a relayed device's session resumed with the
// same MAC key (the relay replaying its Hello after the link dropped)
// skips what the ended session handled; any other session does not. The
// mark is taken (resume) before the session is attached: serveRelayed does
// it before its relay's batches can reach the session.
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
	r.resume(s)
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
		r.resume(tc.s)
		r.attach(tc.s)
		if tc.s.handled != 0 {
			t.Errorf("%s: handled %d, want 0", tc.name, tc.s.handled)
		}
		r.detach(tc.s)
	}

	end(sess("d1", link, "k1"), 5)
	r.forget("d1")
	s = sess("d1", link, "k1")
	if r.resume(s); s.handled != 0 {
		t.Errorf("after forget: handled %d, want 0", s.handled)
	}
}

// TestRegistryGrainsLongestID: the grains of an id of protocol.MaxIDLen
// bytes are saved (as <id>.grains, through <id>.grains.tmp: MaxIDLen leaves
// room for the suffix within a file name's 255 bytes) and read back; cached
// grains under an id that is not valid are not loaded.
func TestRegistryGrainsLongestID(t *testing.T) {
	dir := t.TempDir()
	r, err := newRegistry(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", protocol.MaxIDLen)
	r.setGrains(long, map[string]any{"os": "Debian"})
	if _, err := os.Stat(filepath.Join(dir, long+".grains")); err != nil {
		t.Fatalf("grains of a %d-byte id: %v", len(long), err)
	}
	b, _ := protocol.Marshal(map[string]any{"os": "Evil"})
	if err := os.WriteFile(filepath.Join(dir, "cam9,evil.grains"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r2, err := newRegistry(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := r2.grains[long].m["os"]; got != "Debian" {
		t.Errorf("grains read back: got os %v, want Debian", got)
	}
	if _, ok := r2.grains["cam9,evil"]; ok || len(r2.grains) != 1 {
		t.Errorf("grains loaded: got %d ids, want only the valid one", len(r2.grains))
	}
}
