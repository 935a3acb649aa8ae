package protocol

import (
	"bytes"
	"strings"
	"testing"
)

func TestStateCallRoundTrip(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, MinStateNonce)
	for _, m := range []Message{
		&StateGet{Req: 1, Fun: "state.apply", Nonce: nonce},
		&StateGet{Req: 1 << 40, Fun: "state.sls", Arg: []any{"web,db"}, Kwarg: map[string]any{"test": true, "saltenv": "base"}, Nonce: nonce},
		&StateJob{Req: 1, Job: Signed{Body: []byte{0xa0}, Sig: bytes.Repeat([]byte{1}, 64)}},
		&StateJob{Req: 2, Err: "state.foo is not a state function the master compiles"},
	} {
		roundTrip(t, m)
	}
}

func TestStateCallLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Message
	}{
		{"no function", &StateGet{Req: 1, Nonce: make([]byte, MinStateNonce)}},
		{"long function", &StateGet{Req: 1, Fun: strings.Repeat("f", MaxStateFun+1), Nonce: make([]byte, MinStateNonce)}},
		{"short nonce", &StateGet{Req: 1, Fun: "state.apply", Nonce: make([]byte, MinStateNonce-1)}},
		{"long nonce", &StateGet{Req: 1, Fun: "state.apply", Nonce: make([]byte, MaxStateNonce+1)}},
		{"empty answer", &StateJob{Req: 1}},
		{"unsigned answer", &StateJob{Req: 1, Job: Signed{Body: []byte{0xa0}}}},
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
