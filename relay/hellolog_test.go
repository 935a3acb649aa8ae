package relay

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// loggedHellos lists the ids whose Hello dir's hello.log holds.
func loggedHellos(t *testing.T, dir string) []string {
	t.Helper()
	last, damage, err := readHellos(filepath.Join(dir, helloLogName))
	if err != nil || len(damage) > 0 {
		t.Fatalf("read the Hellos' log: %v, damage %v", err, damage)
	}
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// leaveItems runs a store in dir in which each of devs says Hello with
// the given version and puts three items, then stops the relay (the items
// wait for a restart).
func leaveItems(t *testing.T, dir string, version string, devs ...string) {
	t.Helper()
	s := openTestStore(t, dir, 1<<20, 0)
	for _, id := range devs {
		d := &device{id: id, hello: &protocol.Hello{ID: id, Version: version}}
		if err := s.saveHello(d); err != nil {
			t.Fatal(err)
		}
		for seq := uint64(1); seq <= 3; seq++ {
			s.put(d, seq, wireOf(d, seq, 100))
		}
		s.forget(d, true)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
}

// orphanVersions reopens the store in dir: each orphan's Hello version,
// and the items dropped for want of a Hello.
func orphanVersions(t *testing.T, dir string) (map[string]string, uint64) {
	t.Helper()
	s := openTestStore(t, dir, 1<<20, 0)
	got := make(map[string]string)
	for _, d := range s.orphanList() {
		got[d.id] = d.hello.Version
	}
	_, _, dropped := s.stats()
	return got, dropped
}

// TestHelloLogLatest: a device's Hello is the last one saved: after a
// reconnect, its new session's, which its items that wait were tagged
// under. A restart leaves one record for each device in the log, and none
// for a device with nothing to resume.
func TestHelloLogLatest(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1<<20, 0)
	a := &device{id: "a", hello: &protocol.Hello{ID: "a", Version: "1"}}
	c := &device{id: "c", hello: &protocol.Hello{ID: "c", Version: "1"}}
	for _, d := range []*device{a, c} {
		if err := s.saveHello(d); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		s.put(a, seq, wireOf(a, seq, 100))
	}
	s.forget(a, false) // its connection went: it sends those again itself
	a2 := &device{id: "a", hello: &protocol.Hello{ID: "a", Version: "2"}}
	if err := s.saveHello(a2); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(4); seq <= 5; seq++ {
		s.put(a2, seq, wireOf(a2, seq, 100))
	}
	s.forget(a2, true) // the relay stops
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	leaveItems(t, dir, "3", "b")
	got, dropped := orphanVersions(t, dir)
	if want := map[string]string{"a": "2", "b": "3"}; !cmp.Equal(got, want) || dropped != 0 {
		t.Errorf("orphans' Hello versions %v, %d dropped; want %v, 0", got, dropped, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, helloLogName))
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	reclog.Scan(b, maxWireRecord, func(int, int, reclog.Record, int) bool { records++; return true })
	if ids := loggedHellos(t, dir); records != 2 || !cmp.Equal(ids, []string{"a", "b"}) {
		t.Errorf("%d records in the log after the restart, of %v; want 2, a's and b's (c has nothing to resume)", records, ids)
	}
}

// TestHelloLogRewrite: the log is rewritten once it has grown past twice
// its size (and the slack): the last Hello of each device stays, and no
// more than that.
func TestHelloLogRewrite(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, 1<<20, 0)
	grains := map[string]any{"pad": strings.Repeat("x", 8<<10)}
	saves := 0
	for i := 0; saves*8<<10 < 3*helloSlack; i++ {
		for _, id := range []string{"a", "b", "c"} {
			h := &protocol.Hello{ID: id, Version: "v" + strings.Repeat("i", i%7), Grains: grains}
			if err := s.saveHello(&device{id: id, hello: h}); err != nil {
				t.Fatal(err)
			}
			saves++
		}
	}
	s.hellos.mu.Lock()
	size, base := s.hellos.size, s.hellos.base
	s.hellos.mu.Unlock()
	fi, err := os.Stat(filepath.Join(dir, helloLogName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size || size > 2*base+helloSlack+16<<10 || base == 0 || base > 3*(9<<10) {
		t.Errorf("after %d saves the log is %d bytes (%d counted), rewritten at %d; want it rewritten to 3 Hellos and grown less than the slack since", saves, fi.Size(), size, base)
	}
	if ids := loggedHellos(t, dir); !cmp.Equal(ids, []string{"a", "b", "c"}) {
		t.Errorf("ids in the log %v, want a, b, c", ids)
	}
	if _, err := os.Stat(filepath.Join(dir, helloLogName+".new")); !os.IsNotExist(err) {
		t.Errorf("the rewrite left its new file: %v", err)
	}
}

// TestHelloLogLegacy: a relay upgraded from one that kept a file per
// device under hello/ resumes those devices with the Hellos there, and
// the directory goes.
func TestHelloLogLegacy(t *testing.T) {
	dir := t.TempDir()
	leaveItems(t, dir, "new", "a")
	leaveItems(t, dir, "old", "b")
	if err := os.Remove(filepath.Join(dir, helloLogName)); err != nil {
		t.Fatal(err)
	}
	// b's Hello as the old relay kept it; a's never kept.
	wire, err := protocol.Encode(&protocol.Hello{ID: "b", Version: "old"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("b"))
	if err := os.MkdirAll(filepath.Join(dir, legacyHelloDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, legacyHelloDir, hex.EncodeToString(sum[:16])), reclog.Append(nil, recHello, 0, wire), 0o600); err != nil {
		t.Fatal(err)
	}
	got, dropped := orphanVersions(t, dir)
	if want := map[string]string{"b": "old"}; !cmp.Equal(got, want) || dropped != 3 {
		t.Errorf("orphans' Hello versions %v, %d dropped; want %v, 3 (a's: no Hello)", got, dropped, want)
	}
	if _, err := os.Stat(filepath.Join(dir, legacyHelloDir)); !os.IsNotExist(err) {
		t.Errorf("hello/ still there (%v), want it deleted once read", err)
	}
	if ids := loggedHellos(t, dir); !cmp.Equal(ids, []string{"b"}) {
		t.Errorf("ids in the log %v, want b's Hello moved there", ids)
	}
}

// TestHelloLogDamage: a damaged Hello record is skipped, never a reason
// not to start. With no other Hello the device's items are dropped and
// counted; with an earlier intact one, that one is used (the master then
// refuses the items' MACs: hellolog.go).
func TestHelloLogDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func([]byte) []byte
		want   map[string]string
		drop   uint64
	}{
		{"flipped bit in the only Hello", func(b []byte) []byte { b[len(b)-5] ^= 1; return b }, map[string]string{}, 3},
		{"torn last Hello", func(b []byte) []byte { return b[:len(b)-3] }, map[string]string{}, 3},
		{"garbage appended", func(b []byte) []byte { return append(b, "\xff\xff\xff\x7fjunk"...) }, map[string]string{"a": "1"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			leaveItems(t, dir, "1", "a")
			p := filepath.Join(dir, helloLogName)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			got, dropped := orphanVersions(t, dir)
			if !cmp.Equal(got, tt.want) || dropped != tt.drop {
				t.Errorf("orphans' Hello versions %v, %d dropped; want %v, %d", got, dropped, tt.want, tt.drop)
			}
		})
	}
	t.Run("a later Hello torn", func(t *testing.T) {
		dir := t.TempDir()
		leaveItems(t, dir, "1", "a")
		s := openTestStore(t, dir, 1<<20, 0)
		if err := s.saveHello(&device{id: "a", hello: &protocol.Hello{ID: "a", Version: "2"}}); err != nil {
			t.Fatal(err)
		}
		s.close()
		p := filepath.Join(dir, helloLogName)
		b, _ := os.ReadFile(p)
		os.WriteFile(p, b[:len(b)-3], 0o600)
		if got, _ := orphanVersions(t, dir); got["a"] != "1" {
			t.Errorf("orphan a's Hello version %q, want the intact earlier one, 1", got["a"])
		}
	})
}

// TestHelloLogClosed: a Hello saved once the store is closed (a device
// taken in while the relay stops) is refused, and the log is not opened
// again behind the store's back.
func TestHelloLogClosed(t *testing.T) {
	s := openTestStore(t, t.TempDir(), 1<<20, 0)
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if err := s.saveHello(&device{id: "a", hello: &protocol.Hello{ID: "a"}}); err == nil {
		t.Error("saveHello after close: no error")
	}
	s.hellos.mu.Lock()
	defer s.hellos.mu.Unlock()
	if s.hellos.f != nil {
		t.Error("the Hellos' log was opened again after close")
	}
}
