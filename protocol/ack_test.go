package protocol

import "testing"

func TestAckRoundTrip(t *testing.T) {
	for _, m := range []Message{&Ack{}, &Ack{Seq: 1}, &Ack{Seq: 1<<64 - 1}} {
		roundTrip(t, m)
	}
}

func TestAckDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind
	}{
		{"null body", []byte{byte(TypeAck), 0xf6}, KindMalformed},
		{"no body", []byte{byte(TypeAck)}, KindMalformed},
		{"negative seq", []byte{byte(TypeAck), 0xa1, 0x01, 0x20}, KindMalformed},
		{"string seq", []byte{byte(TypeAck), 0xa1, 0x01, 0x61, 'x'}, KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.in)
			if err == nil {
				t.Fatalf("Decode(%x) = %#v, want error", tc.in, m)
			}
			wantKind(t, err, tc.want)
		})
	}
}

// TestSeqRoundTrip: the sequence number of returns and events travels
// beside the signed body, and a message without one (an older agent's)
// decodes to Seq 0.
func TestSeqRoundTrip(t *testing.T) {
	pub, priv := newKey(t)
	r, err := SignReturn(priv, testReturnBody())
	if err != nil {
		t.Fatal(err)
	}
	e, err := SignEvent(priv, testEventBody())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Message{
		&Return{Signed: r.Signed, Seq: 7}, &Return{Signed: r.Signed},
		&Event{Signed: e.Signed, Seq: 1<<64 - 1}, &Event{Signed: e.Signed},
	} {
		roundTrip(t, m)
	}
	// The seq does not touch what is signed.
	if _, err := (&Return{Signed: r.Signed, Seq: 9}).Open(pub, "web01"); err != nil {
		t.Errorf("Open of a return with a seq: %v", err)
	}
	// Seq 0 is left out of the encoding: the bytes are those an older
	// agent sends.
	got, err := Encode(&Return{Signed: r.Signed})
	if err != nil {
		t.Fatal(err)
	}
	old, err := Marshal(r.Signed)
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]byte{byte(TypeReturn)}, old...); string(got) != string(want) {
		t.Errorf("Encode(Return with Seq 0): got %x, want %x", got, want)
	}
}
