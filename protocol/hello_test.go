package protocol

import (
	"strings"
	"testing"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, m := range []*Hello{
		{ID: "a", Version: "0.1.0", Caps: CapabilityVersion},
		{ID: "web01.example.com", Version: "1.2.3", Caps: 7, Relay: true, Grains: map[string]any{
			"os": "Debian", "num_cpus": int64(2), "ipv4": []any{"10.0.0.5"}, "nested": map[string]any{"k": true},
		}},
		{ID: strings.Repeat("x", MaxIDLen), Version: "", Caps: 0},
	} {
		roundTrip(t, m)
	}
}

func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"web01", true},
		{"web01.example.com", true},
		{"dev-ice_1 name", true},
		{"ü", true},
		{strings.Repeat("x", MaxIDLen), true},
		{"", false},
		{strings.Repeat("x", MaxIDLen+1), false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{`a\b`, false},
		{"a\nb", false},
		{"a\x00", false},
		{"a\x7f", false},
	} {
		err := ValidID(tc.id)
		if got := err == nil; got != tc.ok {
			t.Errorf("ValidID(%q): got %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && KindOf(err) != KindMalformed {
			t.Errorf("ValidID(%q): got kind %v, want %v", tc.id, KindOf(err), KindMalformed)
		}
	}
}

func TestHelloDecodeRefusesBadID(t *testing.T) {
	for _, id := range []string{"", "../etc", "a\x00b"} {
		b, err := Encode(&Hello{ID: id, Version: "1"})
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		m, err := Decode(b)
		if err == nil {
			t.Fatalf("Decode(hello id %q) = %#v, want error", id, m)
		}
		wantKind(t, err, KindMalformed)
	}
}
