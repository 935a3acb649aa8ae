package protocol

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cborHead returns the head of a CBOR item of major type major and argument n.
func cborHead(major byte, n uint64) []byte {
	switch {
	case n < 24:
		return []byte{major<<5 | byte(n)}
	case n <= 0xff:
		return []byte{major<<5 | 24, byte(n)}
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16([]byte{major<<5 | 25}, uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32([]byte{major<<5 | 26}, uint32(n))
	}
	return binary.BigEndian.AppendUint64([]byte{major<<5 | 27}, n)
}

// grainsFrame returns a Grains frame whose grain "a" holds the CBOR item v.
func grainsFrame(v []byte) []byte {
	return append([]byte{byte(TypeGrains), 0xa1, 0x01, 0xa1, 0x61, 'a'}, v...)
}

// nested returns depth arrays inside each other around a 0.
func nested(depth int) []byte {
	return append(bytes.Repeat([]byte{0x81}, depth), 0x00)
}

// array returns a CBOR array of n zeros.
func array(n int) []byte {
	return append(cborHead(4, uint64(n)), make([]byte, n)...)
}

// intMap returns a CBOR map of n pairs "k<i>": 0.
func strMap(n int) []byte {
	b := cborHead(5, uint64(n))
	for i := 0; i < n; i++ {
		k := []byte{byte('a' + i%26), byte('a' + i/26%26), byte('a' + i/676%26), byte('a' + i/17576%26)}
		b = append(append(append(b, cborHead(3, uint64(len(k)))...), k...), 0x00)
	}
	return b
}

func TestCodecStrictness(t *testing.T) {
	// Grains frame: {1: {"a": X}} is 6 bytes around X and 3 levels deep
	// before X (the type byte is not CBOR).
	const grainsDepth = 2
	for _, tc := range []struct {
		name string
		in   []byte
		want Kind // KindOther: must decode
	}{
		{"duplicate struct key", []byte{byte(TypePing), 0xa2, 0x01, 0x01, 0x01, 0x02}, KindMalformed},
		{"duplicate unknown key", []byte{byte(TypePing), 0xa3, 0x01, 0x01, 0x09, 0x01, 0x09, 0x02}, KindMalformed},
		{"duplicate key in any", grainsFrame([]byte{0xa2, 0x61, 'k', 0x01, 0x61, 'k', 0x02}), KindMalformed},
		{"duplicate grains key", []byte{byte(TypeGrains), 0xa1, 0x01, 0xa2, 0x61, 'a', 0x01, 0x61, 'a', 0x01}, KindMalformed},
		{"indefinite map body", []byte{byte(TypePing), 0xbf, 0x01, 0x01, 0xff}, KindMalformed},
		{"indefinite array", grainsFrame([]byte{0x9f, 0x01, 0xff}), KindMalformed},
		{"indefinite map", grainsFrame([]byte{0xbf, 0x61, 'k', 0x01, 0xff}), KindMalformed},
		{"indefinite byte string", grainsFrame([]byte{0x5f, 0x41, 0x00, 0xff}), KindMalformed},
		{"indefinite text string", grainsFrame([]byte{0x7f, 0x61, 'x', 0xff}), KindMalformed},
		{"tag 1 time", grainsFrame([]byte{0xc1, 0x1a, 0x65, 0x5d, 0xf0, 0x00}), KindMalformed},
		{"tag 0 time string", grainsFrame([]byte{0xc0, 0x61, '1'}), KindMalformed},
		{"tag 2 bignum", grainsFrame([]byte{0xc2, 0x41, 0x01}), KindMalformed},
		{"tag 55799 self-describe", []byte{byte(TypePing), 0xd9, 0xd9, 0xf7, 0xa1, 0x01, 0x01}, KindMalformed},
		{"tag 55799 inside", grainsFrame([]byte{0xd9, 0xd9, 0xf7, 0x01}), KindMalformed},
		{"tag on struct field", []byte{byte(TypePing), 0xa1, 0x01, 0xc1, 0x01}, KindMalformed},
		{"integer key in any", grainsFrame([]byte{0xa1, 0x01, 0x01}), KindMalformed},
		{"negative key in any", grainsFrame([]byte{0xa1, 0x20, 0x01}), KindMalformed},
		{"array key in any", grainsFrame([]byte{0xa1, 0x80, 0x01}), KindMalformed},
		{"float key in any", grainsFrame([]byte{0xa1, 0xf9, 0x3c, 0x00, 0x01}), KindMalformed},
		{"invalid utf-8", grainsFrame([]byte{0x62, 0xc3, 0x28}), KindMalformed},
		{"float into int", []byte{byte(TypePing), 0xa1, 0x01, 0xf9, 0x3c, 0x00}, KindMalformed},
		{"nesting at limit", grainsFrame(nested(MaxNesting - grainsDepth)), KindOther},
		{"nesting over limit", grainsFrame(nested(MaxNesting - grainsDepth + 1)), KindTooLarge},
		{"array at limit", grainsFrame(array(MaxElements)), KindOther},
		{"array over limit", grainsFrame(array(MaxElements + 1)), KindTooLarge},
		{"array count huge, no data", grainsFrame(cborHead(4, 1<<62)), KindTooLarge},
		{"map at limit", grainsFrame(strMap(MaxElements)), KindOther},
		{"map over limit", grainsFrame(strMap(MaxElements + 1)), KindTooLarge},
		{"map count huge, no data", grainsFrame(cborHead(5, 1<<40)), KindTooLarge},
		{"byte string longer than data", grainsFrame(append(cborHead(2, 1<<30), 1, 2, 3)), KindMalformed},
		{"text string longer than data", grainsFrame(append(cborHead(3, 1<<62), 'a')), KindMalformed},
		{"byte string length over int64", grainsFrame(cborHead(2, 1<<64-1)), KindMalformed},
		{"reserved additional info", grainsFrame([]byte{0x1c}), KindMalformed},
		{"break outside indefinite", grainsFrame([]byte{0xff}), KindMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode(tc.in)
			if tc.want == KindOther {
				if err != nil {
					t.Fatalf("Decode: got %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode = %#v, want error", m)
			}
			wantKind(t, err, tc.want)
		})
	}
}

// TestCodecContainerLimit checks the limit on the number of maps and arrays
// in one message: each costs tens of bytes decoded for one byte of input.
func TestCodecContainerLimit(t *testing.T) {
	// {1: {"a": [[], [], ...]}}: the body map, the grains map and the
	// outer array are 3 containers, nested inside 2 levels of arrays so no
	// one array exceeds MaxElements.
	frame := func(total int) []byte {
		b := grainsFrame(nil)
		inner := total - 3
		b = append(b, cborHead(4, uint64((inner+MaxElements-2)/(MaxElements-1)))...)
		for inner > 0 {
			n := min(inner-1, MaxElements-1)
			b = append(b, cborHead(4, uint64(n))...)
			b = append(b, bytes.Repeat([]byte{0x80}, n)...)
			inner -= n + 1
		}
		return b
	}
	if _, err := Decode(frame(MaxContainers)); err != nil {
		t.Errorf("Decode(%d containers): got %v, want success", MaxContainers, err)
	}
	_, err := Decode(frame(MaxContainers + 1))
	wantKind(t, err, KindTooLarge)
}

func TestTooManyContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		want bool
	}{
		{"empty", nil, 0, false},
		{"scalar", []byte{0x01}, 0, false},
		{"one array", []byte{0x80}, 0, true},
		{"one array at limit", []byte{0x80}, 1, false},
		{"strings skipped", append(cborHead(3, 3), 0x80, 0x80, 0x80), 0, false},
		{"byte strings skipped", append(cborHead(2, 300), make([]byte, 300)...), 0, false},
		{"float heads skipped", []byte{0xfb, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, 0, false},
		{"truncated head", []byte{0x19, 0x01}, 0, false},
		{"string past end", append(cborHead(3, 1<<62), 0x80), 0, false},
		{"indefinite stops", []byte{0x9f, 0x80, 0x80}, 0, false},
		{"map and array", []byte{0xa1, 0x61, 'k', 0x80}, 1, true},
	} {
		if got := tooManyContainers(tc.in, tc.max); got != tc.want {
			t.Errorf("tooManyContainers(%s, %d): got %v, want %v", tc.name, tc.max, got, tc.want)
		}
	}
}

// TestCodecLengthBeyondData checks that a string that claims more bytes than
// the input holds is refused without allocating what it claims.
func TestCodecLengthBeyondData(t *testing.T) {
	for _, in := range [][]byte{
		grainsFrame(append(cborHead(2, 1<<30), 1, 2, 3)),
		grainsFrame(append(cborHead(3, 1<<30), 'a')),
		grainsFrame(append(cborHead(4, MaxElements), 0x00)),
		grainsFrame(append(cborHead(5, MaxElements), 0x61, 'k')),
	} {
		var before, after runtime.MemStats
		const runs = 20
		runtime.ReadMemStats(&before)
		for range runs {
			if _, err := Decode(in); KindOf(err) != KindMalformed {
				t.Fatalf("Decode(%x): got %v, want kind %v", in, err, KindMalformed)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 16<<10 {
			t.Errorf("Decode(%x) allocated %d bytes a call, want at most 16 KiB", in, per)
		}
	}
}

// TestCodecDeterministic checks that one value always encodes to the same
// bytes, whatever the order of map iteration.
func TestCodecDeterministic(t *testing.T) {
	v := map[string]any{}
	for i := range 64 {
		v[string(rune('A'+i))] = map[string]any{"x": i, "y": []any{i, "z"}}
	}
	first, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, first) {
			t.Fatalf("Marshal gave different bytes for the same value:\n%x\n%x", first, b)
		}
	}
	var back map[string]any
	if err := Unmarshal(first, &back); err != nil {
		t.Fatal(err)
	}
	again, err := Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, first) {
		t.Errorf("Marshal(Unmarshal(b)) != b:\n%x\n%x", first, again)
	}
}

func TestCodecEncoding(t *testing.T) {
	// Small, exact encodings: keys as integers, shortest floats, no
	// indefinite lengths.
	for _, tc := range []struct {
		name string
		v    any
		want []byte
	}{
		{"ping", &Ping{Seq: 1}, []byte{0xa1, 0x01, 0x01}},
		{"float16", 1.5, []byte{0xf9, 0x3e, 0x00}},
		{"float32", 100000.0, []byte{0xfa, 0x47, 0xc3, 0x50, 0x00}},
		{"sorted keys", map[string]int{"bb": 1, "a": 2}, []byte{0xa2, 0x61, 'a', 0x02, 0x62, 'b', 'b', 0x01}},
		{"omitted", &Hello{ID: "x"}, []byte{0xa3, 0x01, 0x61, 'x', 0x02, 0x60, 0x03, 0x00}},
	} {
		got, err := Marshal(tc.v)
		if err != nil {
			t.Fatalf("Marshal(%s): %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Marshal(%s) (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestEncodeError(t *testing.T) {
	_, err := Encode(&Grains{Grains: map[string]any{"c": make(chan int)}})
	wantKind(t, err, KindMalformed)
	_, err = Marshal(func() {})
	if err == nil {
		t.Errorf("Marshal(func): got no error, want one")
	}
}
