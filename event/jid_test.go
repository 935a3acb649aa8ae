package event

import (
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 11, 22, 11, 57, 4, 123456789, time.UTC), "2026-11-22T11:57:04.123456"},
		{time.Date(2026, 11, 22, 11, 57, 4, 0, time.UTC), "2026-11-22T11:57:04.000000"},
		{time.Date(2026, 11, 22, 12, 57, 4, 5000, time.FixedZone("CET", 3600)), "2026-11-22T11:57:04.000005"},
	}
	for _, tt := range tests {
		if got := Stamp(tt.in); got != tt.want {
			t.Errorf("Stamp(%v) got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestJIDGenFormat(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 57, 4, 123456789, time.UTC)
	g := &JIDGen{UTC: true, now: func() time.Time { return at }}
	if got, want := g.Next(), "20261122115704123456"; got != want {
		t.Errorf("Next() got %q, want %q", got, want)
	}
	// Same microsecond again: bumped by one.
	if got, want := g.Next(), "20261122115704123457"; got != want {
		t.Errorf("Next() in the same µs got %q, want %q", got, want)
	}
	// Clock stepped back: still increasing.
	at = at.Add(-time.Hour)
	if got, want := g.Next(), "20261122115704123458"; got != want {
		t.Errorf("Next() after clock step back got %q, want %q", got, want)
	}
	// Clock moved on: follows it.
	at = time.Date(2026, 12, 31, 23, 59, 59, 999999000, time.UTC)
	if got, want := g.Next(), "20261231235959999999"; got != want {
		t.Errorf("Next() got %q, want %q", got, want)
	}
	// Bump across a second, minute, ... boundary.
	if got, want := g.Next(), "20270101000000000000"; got != want {
		t.Errorf("Next() across the year got %q, want %q", got, want)
	}
}

func TestJIDGenLocal(t *testing.T) {
	at := time.Date(2026, 11, 22, 11, 57, 4, 1000, time.UTC)
	g := &JIDGen{now: func() time.Time { return at }}
	if got, want := g.Next(), formatJID(at.Local()); got != want {
		t.Errorf("Next() got %q, want local time %q", got, want)
	}
}

func TestJIDGenUniqueRealClock(t *testing.T) {
	var g JIDGen
	prev := ""
	seen := make(map[string]bool)
	for range 100000 {
		j := g.Next()
		if !IsJID(j) || len(j) != 20 {
			t.Fatalf("Next() got %q, want a 20-digit jid", j)
		}
		if seen[j] {
			t.Fatalf("Next() got %q twice", j)
		}
		if j <= prev {
			t.Fatalf("Next() got %q after %q, want strictly increasing", j, prev)
		}
		seen[j] = true
		prev = j
	}
}

func TestIsJID(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"20261122115704123456", true},
		{"20261122115704123456_1234", true},
		{"20261122115704123456_", false},
		{"20261122115704123456x", false},
		{"2026112211570412345", false},
		{"202611221157041234567", false},
		{"2026112211570412345a", false},
		{"", false},
		{"req", false},
	}
	for _, tt := range tests {
		if got := IsJID(tt.in); got != tt.want {
			t.Errorf("IsJID(%q) got %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestJIDTime(t *testing.T) {
	want := time.Date(2026, 11, 22, 11, 57, 4, 123456000, time.UTC)
	got, ok := JIDTime("20261122115704123456", time.UTC)
	if !ok || !got.Equal(want) {
		t.Errorf("JIDTime got %v, %v, want %v, true", got, ok, want)
	}
	if _, ok := JIDTime("20261322115704123456", time.UTC); ok {
		t.Errorf("JIDTime of month 13 got ok, want not ok")
	}
	if _, ok := JIDTime("nope", time.UTC); ok {
		t.Errorf("JIDTime(\"nope\") got ok, want not ok")
	}
}

func TestJIDGenNode(t *testing.T) {
	clock := time.Date(2026, 11, 23, 14, 0, 0, 123456789, time.UTC)
	a := JIDGen{UTC: true, Node: 7, HasNode: true, now: func() time.Time { return clock }}
	b := JIDGen{UTC: true, Node: 42, HasNode: true, now: func() time.Time { return clock }}
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		for _, g := range []*JIDGen{&a, &b} {
			jid := g.Next()
			if !IsJID(jid) || len(jid) != 20 {
				t.Fatalf("Next() = %q, want a 20-digit jid", jid)
			}
			if seen[jid] {
				t.Fatalf("jid %s made twice", jid)
			}
			seen[jid] = true
		}
	}
	first := JIDGen{UTC: true, Node: 7, HasNode: true, now: func() time.Time { return clock }}
	if got, want := first.Next(), "20261123140000123007"; got != want {
		t.Errorf("Next() = %s, want %s (milliseconds, then the node)", got, want)
	}
	if got, ok := JIDTime(first.Next(), time.UTC); !ok || got.Sub(clock) > 2*time.Millisecond || clock.Sub(got) > time.Millisecond {
		t.Errorf("JIDTime of a node jid = %v, %v; want about %v", got, ok, clock)
	}
}
