package protocol

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
)

func TestPillarRoundTrip(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, MinPillarNonce)
	for _, m := range []Message{
		&PillarGet{Req: 1, Nonce: nonce},
		&PillarGet{Req: 1 << 40, Nonce: bytes.Repeat([]byte{1}, MaxPillarNonce)},
		&PillarData{Req: 1, Sealed: bytes.Repeat([]byte{2}, SealOverhead+10)},
		&PillarData{Req: 2, Err: "pillar of web1 failed to compile"},
	} {
		roundTrip(t, m)
	}
}

func TestPillarLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Message
	}{
		{"short nonce", &PillarGet{Req: 1, Nonce: make([]byte, MinPillarNonce-1)}},
		{"long nonce", &PillarGet{Req: 1, Nonce: make([]byte, MaxPillarNonce+1)}},
		{"empty answer", &PillarData{Req: 1}},
		{"box shorter than its overhead", &PillarData{Req: 1, Sealed: make([]byte, SealOverhead-1)}},
		{"box over the bound", &PillarData{Req: 1, Sealed: make([]byte, MaxPillar+SealOverhead+1)}},
		{"long error", &PillarData{Req: 1, Err: strings.Repeat("e", MaxPillarErr+1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Encode(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(b)
			if err == nil {
				t.Fatalf("Decode = %#v, want an error", m)
			}
			wantKind(t, err, KindMalformed)
		})
	}
}

func TestSealKwargs(t *testing.T) {
	a, b := testIdentity(t, 1), testIdentity(t, 2)
	plain := map[string]any{"__state__": map[string]any{"low": []any{map[string]any{"contents": "s3cret"}}}}
	to := map[string]ed25519.PublicKey{"a": a.Pub, "b": b.Pub}
	sealed, keys, err := SealKwargs("20260101000000000001", plain, to)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("s3cret")) {
		t.Fatal("the sealed bytes hold the plain text")
	}
	for id, ident := range map[string]*Identity{"a": a, "b": b} {
		got, err := ident.OpenKwargs(id, "20260101000000000001", sealed, keys)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		st, _ := got["__state__"].(map[string]any)
		if st == nil || st["low"] == nil {
			t.Fatalf("%s opened %#v", id, got)
		}
	}
	// A's identity cannot use B's box, nor the box under another jid, nor
	// a ciphertext altered by one bit.
	if _, err := a.OpenKwargs("a", "20260101000000000001", sealed, map[string]any{"a": keys["b"]}); err == nil {
		t.Error("a opened b's box")
	}
	if _, err := a.OpenKwargs("a", "20260101000000000002", sealed, keys); err == nil {
		t.Error("opened under another jid")
	}
	bad := bytes.Clone(sealed)
	bad[len(bad)-1] ^= 1
	if _, err := a.OpenKwargs("a", "20260101000000000001", bad, keys); err == nil {
		t.Error("an altered ciphertext opened")
	}
	c := testIdentity(t, 3)
	if _, err := c.OpenKwargs("c", "20260101000000000001", sealed, keys); KindOf(err) != KindBadSig {
		t.Errorf("a device without a box: %v, want KindBadSig", err)
	}
}

func testIdentity(t *testing.T, seed byte) *Identity {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return &Identity{Priv: priv, Pub: priv.Public().(ed25519.PublicKey)}
}

// BenchmarkSealState1000 is what sealing adds to a state job for 1,000
// devices sharing one variant: 4 jobs of 250 devices (master/states.go
// maxForIDs is 256), each the states encrypted once and the key sealed
// to each device. Reports the bytes sealing adds per device.
func BenchmarkSealState1000(b *testing.B) {
	st := map[string]any{"low": []any{map[string]any{"state": "file", "fun": "managed", "name": "/etc/app.conf",
		"contents": strings.Repeat("key = value\n", 170)}}} // about 2 KiB
	to := make([]map[string]ed25519.PublicKey, 4)
	for j := range to {
		to[j] = make(map[string]ed25519.PublicKey, 250)
		for i := range 250 {
			pub, _, _ := ed25519.GenerateKey(nil)
			to[j][fmt.Sprintf("cam%04d", j*250+i)] = pub
		}
	}
	plain, _ := Marshal(map[string]any{"__state__": st})
	var added int
	for b.Loop() {
		added = 0
		for j := range to {
			sealed, keys, err := SealKwargs("20260101000000000001", map[string]any{"__state__": st}, to[j])
			if err != nil {
				b.Fatal(err)
			}
			enc, _ := Marshal(map[string]any{KwargSealed: sealed, KwargKeys: keys})
			added += len(enc) - len(plain)
		}
	}
	b.ReportMetric(float64(added)/1000, "B/device")
}
