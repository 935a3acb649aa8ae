package protocol

import "testing"

func TestPingPongRoundTrip(t *testing.T) {
	for _, m := range []Message{
		&Ping{}, &Ping{Seq: 1}, &Ping{Seq: 1<<64 - 1},
		&Pong{}, &Pong{Seq: 42}, &Pong{Seq: 1<<64 - 1},
	} {
		roundTrip(t, m)
	}
}

func TestPingDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind
	}{
		{"null body", []byte{byte(TypePing), 0xf6}, KindMalformed},
		{"no body", []byte{byte(TypePing)}, KindMalformed},
		{"negative seq", []byte{byte(TypePing), 0xa1, 0x01, 0x20}, KindMalformed},
		{"string seq", []byte{byte(TypePong), 0xa1, 0x01, 0x61, 'x'}, KindMalformed},
		{"trailing bytes", []byte{byte(TypePing), 0xa1, 0x01, 0x01, 0x00}, KindMalformed},
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
