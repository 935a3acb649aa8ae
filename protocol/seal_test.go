package protocol

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	dev, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("db_password: hunter2")
	box, err := SealTo(dev.Pub, "cam1", "pillar", []byte("jid1"), plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(box, plain) || bytes.Contains(box, []byte("hunter2")) {
		t.Fatalf("box holds the plaintext")
	}
	if len(box) != len(plain)+SealOverhead {
		t.Errorf("box is %d bytes, want %d", len(box), len(plain)+SealOverhead)
	}
	got, err := dev.Open("cam1", "pillar", []byte("jid1"), box)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v; want %q", got, err, plain)
	}
	again, _ := SealTo(dev.Pub, "cam1", "pillar", []byte("jid1"), plain)
	if bytes.Equal(again, box) {
		t.Errorf("two boxes of the same data are equal: the ephemeral key is not fresh")
	}
	flipped := append([]byte{}, box...)
	flipped[len(flipped)-1] ^= 1
	for _, tc := range []struct {
		name, id, purpose string
		ident             *Identity
		ad, box           []byte
	}{
		{"other device", "cam1", "pillar", other, []byte("jid1"), box},
		{"other id", "cam2", "pillar", dev, []byte("jid1"), box},
		{"other purpose", "cam1", "state", dev, []byte("jid1"), box},
		{"other ad", "cam1", "pillar", dev, []byte("jid2"), box},
		{"altered", "cam1", "pillar", dev, []byte("jid1"), flipped},
		{"short", "cam1", "pillar", dev, []byte("jid1"), box[:SealOverhead-1]},
	} {
		_, err := tc.ident.Open(tc.id, tc.purpose, tc.ad, tc.box)
		var pe *ProtoError
		if !errors.As(err, &pe) || pe.Kind != KindBadSig {
			t.Errorf("%s: Open error = %v, want a KindBadSig protocol error", tc.name, err)
		}
	}
	if _, err := SealTo(dev.Pub[:31], "cam1", "pillar", nil, plain); err == nil {
		t.Errorf("SealTo with a 31-byte key: no error")
	}
}

// TestMontgomeryU: the master's map of a device's ed25519 key gives the
// X25519 public key of the device's own derived secret, for many keys.
func TestMontgomeryU(t *testing.T) {
	for range 200 {
		id, err := GenerateIdentity()
		if err != nil {
			t.Fatal(err)
		}
		k, err := id.sealKey()
		if err != nil {
			t.Fatal(err)
		}
		got, err := montgomeryU(id.Pub)
		if err != nil {
			t.Fatal(err)
		}
		if want := k.PublicKey().Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("montgomeryU(%x) = %x, want %x", id.Pub, got, want)
		}
	}
	// y = 1 is the identity point: no Montgomery u.
	one := make([]byte, 32)
	one[0] = 1
	if _, err := montgomeryU(one); err == nil {
		t.Errorf("montgomeryU of y=1: no error")
	}
}
