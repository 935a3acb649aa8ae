package master

import (
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
)

// TestNewKeysPerAddress: over real QUIC from one address, the keys of new
// ids beyond new_keys_per_address are refused with KindRateLimited, write
// nothing and fire no salt/auth event; ids the master knows are still
// answered.
func TestNewKeysPerAddress(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.NewKeysPerAddress = 3 }, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		wantStatus(t, "hello "+id, helloRaw(t, tm, id), protocol.KeyPending)
	}
	for _, id := range []string{"n4", "n5"} {
		wantRefused(t, "hello "+id, helloRaw(t, tm, id), protocol.KindRateLimited)
	}
	// A known id costs no token: n1 with another key is denied, as ever.
	wantStatus(t, "hello n1 again", helloRaw(t, tm, "n1"), protocol.KeyDenied)

	all := dict(t, tm.wheel(t, "key.list_all"))
	if got := strs(t, all["minions_pre"]); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Errorf("pending keys: got %v, want [n1 n2 n3]", got)
	}
	for _, ev := range tm.events.seen {
		if id := ev.Data["id"]; ev.Tag == event.TagAuth && (id == "n4" || id == "n5") {
			t.Errorf("salt/auth event for refused %v: got %v, want none", id, ev.Data)
		}
	}
}

// TestMaxPendingKeys: over real QUIC, a new key beyond max_pending_keys is
// refused with KindPendingFull; accepting one makes room again.
func TestMaxPendingKeys(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.MaxPendingKeys, c.NewKeysPerAddress = 2, 0 }, nil)
	wantStatus(t, "hello p1", helloRaw(t, tm, "p1"), protocol.KeyPending)
	wantStatus(t, "hello p2", helloRaw(t, tm, "p2"), protocol.KeyPending)
	wantRefused(t, "hello p3", helloRaw(t, tm, "p3"), protocol.KindPendingFull)
	tm.wheel(t, "key.accept", "p1")
	wantStatus(t, "hello p3 after an accept", helloRaw(t, tm, "p3"), protocol.KeyPending)
}

// TestNewKeyLimiter: the bucket refills at new_keys_per_address a minute,
// sources are IPv4 addresses and IPv6 /64s, full buckets are forgotten, and
// refusals are logged once a minute with their counts.
func TestNewKeyLimiter(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	l := newNewKeyLimiter(2, zap.New(core))
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	a := &net.UDPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1}
	aOtherPort := &net.UDPAddr{IP: net.ParseIP("192.0.2.1"), Port: 2}
	b := &net.UDPAddr{IP: net.ParseIP("192.0.2.2"), Port: 1}
	v6 := &net.UDPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}
	v6Same64 := &net.UDPAddr{IP: net.ParseIP("2001:db8::ffff:2"), Port: 1}
	v6Other64 := &net.UDPAddr{IP: net.ParseIP("2001:db8:0:1::1"), Port: 1}

	steps := []struct {
		after time.Duration
		addr  net.Addr
		want  bool
	}{
		{0, a, true}, {0, aOtherPort, true}, {0, a, false}, // one bucket per address
		{0, b, true},
		{29 * time.Second, a, false}, {time.Second, a, true}, {0, a, false}, // 2 a minute: one per 30 s
		{0, v6, true}, {0, v6Same64, true}, {0, v6, false}, {0, v6Other64, true},
	}
	for i, st := range steps {
		now = now.Add(st.after)
		if got := l.allow(st.addr); got != st.want {
			t.Errorf("step %d: allow(%v): got %v, want %v", i, st.addr, got, st.want)
		}
	}
	// Two minutes on, every bucket is full again and the sweep forgets it.
	now = now.Add(2 * time.Minute)
	l.allow(b)
	if got := len(l.buckets); got != 1 {
		t.Errorf("buckets after the sweep: got %d, want 1 (b's, just used)", got)
	}

	l.refused(protocol.KindRateLimited, a, "x1")
	l.refused(protocol.KindRateLimited, a, "x2")
	l.refused(protocol.KindPendingFull, b, "x3")
	now = now.Add(refusalLogInterval)
	l.refused(protocol.KindPendingFull, b, "x4")
	warns := logs.FilterLevelExact(zap.WarnLevel).All()
	if len(warns) != 2 {
		t.Fatalf("warnings: got %d, want 2 (one a minute)", len(warns))
	}
	for i, want := range []map[string]any{
		{"rate_limited": int64(1), "pending_full": int64(0), "total": int64(1), "last_id": "x1"},
		{"rate_limited": int64(1), "pending_full": int64(2), "total": int64(4), "last_id": "x4"},
	} {
		got := warns[i].ContextMap()
		for k, v := range want {
			if got[k] != v {
				t.Errorf("warning %d: %s: got %v, want %v", i, k, got[k], v)
			}
		}
	}
	if got := logs.FilterLevelExact(zap.DebugLevel).Len(); got != 2 {
		t.Errorf("debug lines: got %d, want 2 (the refusals between warnings)", got)
	}

	if unlimited := newNewKeyLimiter(0, zap.NewNop()); !unlimited.allow(a) || !unlimited.allow(a) || !unlimited.allow(a) {
		t.Errorf("new_keys_per_address 0: got a refusal, want none")
	}
}
