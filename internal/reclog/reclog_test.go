package reclog

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var log []byte
	want := []Record{{'a', 1, nil}, {'b', 1 << 40, []byte("body")}, {'c', 7, bytes.Repeat([]byte{0xff}, 300)}}
	for _, r := range want {
		log = Append(log, r.Kind, r.Seq, r.Body)
	}
	if got, want := len(log), Size(0)+Size(4)+Size(300); got != want {
		t.Errorf("log size = %d, want %d", got, want)
	}
	for i, w := range want {
		r, n, ok := Next(log, 1024)
		if !ok {
			t.Fatalf("record %d: not read", i)
		}
		if r.Kind != w.Kind || r.Seq != w.Seq || !bytes.Equal(r.Body, w.Body) {
			t.Errorf("record %d = %c %d %q, want %c %d %q", i, r.Kind, r.Seq, r.Body, w.Kind, w.Seq, w.Body)
		}
		log = log[n:]
	}
	if _, _, ok := Next(log, 1024); ok {
		t.Error("read a record past the end")
	}
}

// TestParts: a record written in parts is the record of the whole body.
func TestParts(t *testing.T) {
	dst, start := Start([]byte("prefix"), 'w', 9)
	dst = append(dst, "he"...)
	dst = Finish(append(dst, "llo"...), start)
	if want := Append([]byte("prefix"), 'w', 9, []byte("hello")); !bytes.Equal(dst, want) {
		t.Errorf("record in parts = %x, want %x", dst, want)
	}
}

// TestDamage: a torn, corrupted or oversized record is not read.
func TestDamage(t *testing.T) {
	rec := Append(nil, 'r', 3, []byte("hello"))
	tests := []struct {
		name string
		b    []byte
		max  int
	}{
		{"torn", rec[:len(rec)-1], 100},
		{"header only", rec[:HeaderSize-1], 100},
		{"flipped bit", func() []byte { b := bytes.Clone(rec); b[len(b)-1] ^= 1; return b }(), 100},
		{"body past max", rec, 4},
		{"length below header", func() []byte { b := bytes.Clone(rec); b[0] = 3; return b }(), 100},
	}
	for _, tt := range tests {
		if _, _, ok := Next(tt.b, tt.max); ok {
			t.Errorf("%s: read as a record", tt.name)
		}
	}
	if _, _, ok := Next(rec, 5); !ok {
		t.Error("a body of exactly max was refused")
	}
}
