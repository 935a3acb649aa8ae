package output

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/halite-fleet/halite/internal/saltdata"
)

// The wants below are what CPython 3.11 prints for the same values: the
// normalised list and dict print through saltdata.Repr as Python lists and dicts.

func TestPyRepr(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"", `''`},
		{"a", `'a'`},
		{"it's", `"it's"`},
		{`say "hi"`, `'say "hi"'`},
		{`both ' "`, `'both \' "'`},
		{`back\slash`, `'back\\slash'`},
		{"nl\n", `'nl\n'`},
		{"\x00\x7f\u0080\u00a0\u00ad", `'\x00\x7f\x80\xa0\xad'`},
		{"é世界🎥", `'é世界🎥'`},
		{"\u200b\u2028\ufeff", `'\u200b\u2028\ufeff'`},
		{"\U000e0001", `'\U000e0001'`},
		{"\ue000", `'\ue000'`},
		{[]byte{}, `b''`},
		{[]byte("a'b"), `b"a'b"`},
		{[]byte{0, 0xff, '\\'}, `b'\x00\xff\\'`},
		{[]byte(`"'`), `b'"\''`},
		{nil, "None"},
		{true, "True"},
		{int64(-3), "-3"},
		{list{"a", int64(1), nil, list{}}, "['a', 1, None, []]"},
		{&dict{keys: []any{"a", int64(2)}, vals: []any{false, &dict{}}}, "{'a': False, 2: {}}"},
	}
	for _, tt := range tests {
		if got := saltdata.Repr(tt.in); got != tt.want {
			t.Errorf("saltdata.Repr(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"x\n", []string{"x"}},
		{"\n", []string{""}},
		{"a\n\nb", []string{"a", "", "b"}},
		{"a\r\nb\rc\nd\ve\ff\x1cg\u0085h\u2028i", []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, splitLines(tt.in)); diff != "" {
			t.Errorf("splitLines(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestSplitByteLines(t *testing.T) {
	got := splitByteLines([]byte("a\r\nb\rc\nd\ve"))
	want := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d\ve")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("splitByteLines (-want +got):\n%s", diff)
	}
}
