package master

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
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

// TestRegistryMatchFleet: registry.match answers from the fleet index as
// the per-minion matcher does, after grains change, after a minion is
// forgotten, and after the registry is read back from its cache; accepted
// minions without grains are matched by id.
func TestRegistryMatchFleet(t *testing.T) {
	dir := t.TempDir()
	r, err := newRegistry(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	grains := map[string]map[string]any{}
	set := func(id string, g map[string]any) {
		grains[id] = g
		r.setGrains(id, g)
	}
	for i := range 300 {
		set(fmt.Sprintf("cam%03d", i), map[string]any{
			"os": []string{"Debian", "OpenWrt", "Buildroot"}[i%3], "site": fmt.Sprintf("s%d", i%7),
			"roles": []any{"camera", fmt.Sprintf("zone-%d", i%5)}, "ipv4": []any{fmt.Sprintf("10.0.%d.%d", i/250, i%250)},
		})
	}
	cands := []string{"nograins1", "cam-x"} // accepted, grains never seen
	for id := range grains {
		cands = append(cands, id)
	}
	exprs := []string{
		"G@os:debian and not G@site:s3", "G@roles:zone-2 or cam00*", "not G@os:*", "cam*",
		"( G@os:openwrt or S@10.0.1.0/24 ) and not E@cam1[0-4]", "L@cam001,nograins1,cam299 or G@site:s6",
		"not ( G@os:Debian or G@os:OpenWrt )",
	}
	check := func(r *registry, when string) {
		t.Helper()
		for _, expr := range exprs {
			m, err := targets.Compile(expr, "compound", targets.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, id := range cands {
				if m.Match(&targets.Minion{ID: id, Grains: grains[id]}) {
					want = append(want, id)
				}
			}
			slices.Sort(want)
			if got := r.match(m, cands); !slices.Equal(got, want) {
				t.Errorf("%s: %q matched %v, want %v", when, expr, got, want)
			}
		}
	}
	check(r, "first grains")
	for i := 0; i < 300; i += 4 {
		set(fmt.Sprintf("cam%03d", i), map[string]any{"os": "Debian", "site": "s3"})
	}
	check(r, "grains changed")
	for i := 1; i < 300; i += 10 {
		id := fmt.Sprintf("cam%03d", i)
		r.forget(id)
		delete(grains, id)
	}
	check(r, "minions forgotten")
	r2, err := newRegistry(dir, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	check(r2, "read back")
}
