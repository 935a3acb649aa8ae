package protocol

import (
	"bytes"
	"testing"
)

func testBatch(t testing.TB) *Batch {
	t.Helper()
	ret, err := MACReturn(bytes.Repeat([]byte{7}, 32), testReturnBody())
	if err != nil {
		t.Fatal(err)
	}
	ret.Seq = 3
	ev, err := SignEvent(fuzzKey, testEventBody())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Encode(ret)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &Batch{Items: []BatchItem{{ID: "web01", Stream: 4, Frame: rb}, {ID: "web01", Stream: 4, Frame: eb}, {ID: "cam2", Stream: 1 << 40, Frame: rb}}}
}

func TestBatchRoundTrip(t *testing.T) {
	b := testBatch(t)
	roundTrip(t, b)
	// The items' frames come back byte for byte, and decode as what the
	// device sent.
	body, _ := Encode(b)
	m, err := DecodeLink(body)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range m.(*Batch).Items {
		if !bytes.Equal(it.Frame, b.Items[i].Frame) {
			t.Errorf("item %d frame: got %x, want %x", i, it.Frame, b.Items[i].Frame)
		}
		if _, err := Decode(it.Frame); err != nil {
			t.Errorf("item %d: Decode: %v", i, err)
		}
	}
	// The overhead bound holds for the longest id and stream number.
	long := &Batch{Items: []BatchItem{{ID: string(bytes.Repeat([]byte{'a'}, MaxIDLen)), Stream: 1<<64 - 1, Frame: make([]byte, 70000)}}}
	enc, err := Encode(long)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(enc) - 70000; got > BatchItemOverhead {
		t.Errorf("one item's overhead: got %d bytes, BatchItemOverhead is %d", got, BatchItemOverhead)
	}
}

func TestBatchDecodeErrors(t *testing.T) {
	ok, err := Encode(testBatch(t))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(v any) []byte {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{byte(TypeBatch)}, b...)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind
	}{
		{"null body", []byte{byte(TypeBatch), 0xf6}, KindMalformed},
		{"truncated", ok[:len(ok)-3], KindMalformed},
		{"no items", enc(map[int]any{1: []any{}}), KindMalformed},
		{"items missing", enc(map[int]any{}), KindMalformed},
		{"items not a list", enc(map[int]any{1: "x"}), KindMalformed},
		{"bad id", enc(map[int]any{1: []any{map[int]any{1: "a/b", 2: 4, 3: []byte{4, 0xa0}}}}), KindMalformed},
		{"empty id", enc(map[int]any{1: []any{map[int]any{1: "", 2: 4, 3: []byte{4, 0xa0}}}}), KindMalformed},
		{"frame as text", enc(map[int]any{1: []any{map[int]any{1: "a", 2: 4, 3: "x"}}}), KindMalformed},
		{"negative stream", enc(map[int]any{1: []any{map[int]any{1: "a", 2: -1, 3: []byte{4}}}}), KindMalformed},
		{"item not a map", enc(map[int]any{1: []any{1}}), KindMalformed},
		{"duplicate key", []byte{byte(TypeBatch), 0xa2, 0x01, 0x80, 0x01, 0x80}, KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeLink(tc.in)
			if err == nil {
				t.Fatalf("DecodeLink(%x) = %#v, want error", tc.in, m)
			}
			wantKind(t, err, tc.want)
		})
	}
	// Off a relay link, a batch is a message type the reader does not know.
	if _, err := Decode(ok); KindOf(err) != KindUnknownType {
		t.Errorf("Decode(a batch) = %v, want an unknown type", err)
	}
}
