package output

import (
	"strings"
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

// TestPformatSplitsLongStrings pins pprint's splitting of a long str or
// bytes into adjacent literals (Lib/pprint.py _pprint_str, _pprint_bytes,
// _wrap_bytes_repr), which Salt's pprint outputter
// (salt/output/pprint_out.py) prints through pprint.pformat.
func TestPformatSplitsLongStrings(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"top string", "a top-level string with many words in it that runs well past the eighty column limit, so pprint wraps it in parentheses",
			"('a top-level string with many words in it that runs well past the eighty '\n 'column limit, so pprint wraps it in parentheses')"},
		{"top one word", strings.Repeat("x", 90), "'" + strings.Repeat("x", 90) + "'"},
		{"top lines", "first line\nsecond line that is long enough on its own to be split at its spaces by pprint, twice over\r\nthird",
			"('first line\\n'\n 'second line that is long enough on its own to be split at its spaces by '\n 'pprint, twice over\\r\\n'\n 'third')"},
		{"quote per chunk", "it's a string whose first chunk holds a quote while the second one holds no such character at all, see",
			"(\"it's a string whose first chunk holds a quote while the second one holds no \"\n 'such character at all, see')"},
		{"separators", "words\x1cparted\x1dby\x1einformation\x1fseparators\u00a0and\u2003other unicode spaces that Python counts as whitespace in its regex",
			"('words\\x1c'\n 'parted\\x1d'\n 'by\\x1e'\n 'information\\x1fseparators\\xa0and\\u2003other unicode spaces that Python '\n 'counts as whitespace in its regex')"},
		{"top bytes", func() []byte {
			p := make([]byte, 40)
			for i := range p {
				p[i] = byte(i)
			}
			return p
		}(), `(b'\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x10\x11\x12\x13'` + "\n" + ` b'\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f !"#$%&\'')`},
		{"bytes in list", []any{[]byte(strings.Repeat("0123456789", 10))},
			"[b'0123456789012345678901234567890123456789012345678901234567890123456789012345'\n b'678901234567890123456789']"},
		{"bytes multiple of four", map[string]any{"k": []byte(strings.Repeat("abcd", 30))},
			"{'k': b'" + strings.Repeat("abcd", 17) + "'\n      b'" + strings.Repeat("abcd", 13) + "'}"},
		{"short bytes", []byte{0, 1, 2, 3}, `b'\x00\x01\x02\x03'`},
	}
	for _, tt := range tests {
		v, err := normalize(tt.in)
		if err != nil {
			t.Fatalf("%s: normalize: %v", tt.name, err)
		}
		if got := pyPformat(v); got != tt.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}
