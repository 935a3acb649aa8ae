package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, m := range []*Hello{
		{ID: "a", Version: "0.1.0", Caps: CapabilityVersion},
		{ID: "web01.example.com", Version: "1.2.3", Caps: 7, Relay: true, Grains: map[string]any{
			"os": "Debian", "num_cpus": int64(2), "ipv4": []any{"10.0.0.5"}, "nested": map[string]any{"k": true},
		}},
		{ID: strings.Repeat("x", MaxIDLen), Version: "", Caps: 0},
		{ID: "cam7", Caps: CapabilityVersion, Pub: make([]byte, 32), KX: make([]byte, 32), KXSig: make([]byte, 64), Proxy: true},
	} {
		roundTrip(t, m)
	}
}

func TestEncodeHello(t *testing.T) {
	big := map[string]any{"blob": strings.Repeat("g", MaxHelloFrame)}
	small := map[string]any{"os": "Debian"}
	for _, tc := range []struct {
		name     string
		grains   map[string]any
		wantLate bool
	}{
		{"no grains", nil, false},
		{"small grains in the hello", small, false},
		{"large grains after", big, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Hello{ID: "d1", Version: "1", Caps: CapabilityVersion, Grains: tc.grains, KX: make([]byte, 32)}
			hb, late, err := EncodeHello(h)
			if err != nil {
				t.Fatalf("EncodeHello: %v", err)
			}
			if len(hb) > MaxHelloFrame {
				t.Errorf("hello frame of %d bytes, want at most %d", len(hb), MaxHelloFrame)
			}
			if got := late != nil; got != tc.wantLate {
				t.Fatalf("late grains: got %v, want %v", got, tc.wantLate)
			}
			if h.Grains == nil && tc.grains != nil {
				t.Errorf("EncodeHello changed the caller's Hello")
			}
			m, err := Decode(hb)
			if err != nil {
				t.Fatalf("Decode(hello): %v", err)
			}
			got := m.(*Hello).Grains
			if late != nil {
				if got != nil {
					t.Errorf("hello grains: got %d keys, want none when they follow", len(got))
				}
				gm, err := Decode(late)
				if err != nil {
					t.Fatalf("Decode(grains): %v", err)
				}
				got = gm.(*Grains).Grains
			}
			if diff := cmp.Diff(tc.grains, got); diff != "" {
				t.Errorf("grains received (-sent +got):\n%s", diff)
			}
		})
	}
}

// TestValidID: Salt's valid_id (salt/utils/verify.py: no '/', '\\', NUL;
// not "", ".", "..") is the floor; ids that Salt's key matching
// (salt/key.py Key.name_match: split on ',', then fnmatch) or compound
// matcher (salt/matchers/compound_match.py, salt/utils/minions.py
// TARGET_REX) would read as more than one exact name are refused too.
func TestValidID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"web01", true},
		{"web01.example.com", true},
		{"dev-ice_1", true},
		{"ü", true},
		{"user@host", true},
		{"a.b.c", true},
		{"Web01", true},
		{"G", true},
		{"Gx", true},
		{"G-@x", false},
		{"Land", true},
		{"android", true},
		{"x)", true},
		{"fe80:1", true},
		{strings.Repeat("x", MaxIDLen), true},
		{"", false},
		{strings.Repeat("x", MaxIDLen+1), false},
		{strings.Repeat("é", MaxIDLen/2+1), false},
		{".", false},
		{"..", false},
		{".hidden", false},
		{"a..b", false},
		{"a/b", false},
		{`a\b`, false},
		{"a\nb", false},
		{"a\x00", false},
		{"a\x7f", false},
		{"a\u0085b", false}, // C1 control (NEL)
		{"a\xff", false},    // not UTF-8
		{"cam9,evil", false},
		{"cam*", false},
		{"cam?", false},
		{"cam[1]", false},
		{"cam]", false},
		{"dev ice", false},
		{"dev\tice", false},
		{"dev\u00a0ice", false}, // no-break space
		{"dev\u3000ice", false}, // ideographic space
		{"dev\u200bice", false}, // zero-width space
		{"dev\u202eice", false}, // right-to-left override
		{"-L", false},
		{"-", false},
		{"G@os:Debian", false},
		{"E@.*", false},
		{"L@a", false},
		{"I@x", false},
		{"S@10.0.0.0", false},
		{"P@os:D", false},
		{"J@x", false},
		{"N@group", false},
		{"R@%x", false},
		{"G|@os|Debian", false},
		{"Pé@x", false},
		{"and", false},
		{"or", false},
		{"not", false},
		{"(", false},
		{")", false},
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
	for _, id := range []string{"", "../etc", "a\x00b", "cam9,evil", "cam*", "-L", "G@os:x", "a b"} {
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
