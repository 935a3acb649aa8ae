package protocol

import (
	"bytes"
	"strings"
	"testing"
)

func TestBlobRoundTrip(t *testing.T) {
	h := bytes.Repeat([]byte{0xab}, BlobHashSize)
	for _, m := range []Message{
		&BlobGet{Req: 1, Hash: h},
		&BlobGet{Req: 1 << 50, Hash: h},
		&BlobData{Req: 1, Data: []byte("chunk")},
		&BlobData{Req: 2, Data: bytes.Repeat([]byte{1}, ChunkSize)},
		&BlobData{Req: 3, Err: "unknown chunk"},
		&BlobData{Req: 4}, // an empty chunk: an empty file's
	} {
		roundTrip(t, m)
	}
}

func TestBlobLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Message
		kind Kind
	}{
		{"no hash", &BlobGet{Req: 1}, KindMalformed},
		{"short hash", &BlobGet{Req: 1, Hash: make([]byte, BlobHashSize-1)}, KindMalformed},
		{"long hash", &BlobGet{Req: 1, Hash: make([]byte, BlobHashSize+1)}, KindMalformed},
		{"chunk too large", &BlobData{Req: 1, Data: make([]byte, ChunkSize+1)}, KindTooLarge},
		{"error too long", &BlobData{Req: 1, Err: strings.Repeat("e", MaxBlobErr+1)}, KindTooLarge},
		{"data and error", &BlobData{Req: 1, Data: []byte{1}, Err: "no"}, KindMalformed},
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
			wantKind(t, err, tc.kind)
		})
	}
}
