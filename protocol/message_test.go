package protocol

import (
	"fmt"
	"testing"
)

func TestDecodeDispatch(t *testing.T) {
	// Every type decodes to its own struct, from the smallest valid body.
	for _, m := range []Message{
		&Hello{ID: "a"}, &KeyStatus{Status: KeyPending}, &Job{}, &Return{}, &Event{},
		&Grains{}, &Ping{}, &Pong{}, &Error{}, &Ack{},
	} {
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(%T): %v", m, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(%x): %v", b, err)
		}
		if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", m) || got.Type() != m.Type() {
			t.Errorf("Decode(%x): got %T (%v), want %T (%v)", b, got, got.Type(), m, m.Type())
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind
	}{
		{"empty", nil, KindMalformed},
		{"type 0", []byte{0, 0xa0}, KindUnknownType},
		{"type 200", []byte{200, 0xa0}, KindUnknownType},
		{"type 255", []byte{255}, KindUnknownType},
		{"type only", []byte{byte(TypeHello)}, KindMalformed},
		{"array body", []byte{byte(TypePing), 0x81, 0x01}, KindMalformed},
		{"undefined body", []byte{byte(TypePing), 0xf7}, KindMalformed},
		{"truncated map", []byte{byte(TypePing), 0xa1, 0x01}, KindMalformed},
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

func TestTypeString(t *testing.T) {
	for _, tc := range []struct {
		t    Type
		want string
	}{
		{TypeHello, "hello"}, {TypeKeyStatus, "key_status"}, {TypeJob, "job"}, {TypeReturn, "return"},
		{TypeEvent, "event"}, {TypeGrains, "grains"}, {TypePing, "ping"}, {TypePong, "pong"},
		{TypeError, "error"}, {TypeAck, "ack"}, {TypeBatch, "batch"}, {0, "type(0)"}, {200, "type(200)"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("Type(%d).String(): got %q, want %q", uint8(tc.t), got, tc.want)
		}
	}
}
