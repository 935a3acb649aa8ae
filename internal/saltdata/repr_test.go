package saltdata

import (
	"math"
	"math/big"
	"strings"
	"testing"
)

// The wants below are what CPython 3.11 prints for the same values.

func TestAppendFloat(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{0.5, "0.5"},
		{1e20, "1e+20"},
		{1e16, "1e+16"},
		{1e15, "1000000000000000.0"},
		{9999999999999998, "9999999999999998.0"},
		{1e-4, "0.0001"},
		{1e-5, "1e-05"},
		{0.1, "0.1"},
		{1.0 / 3, "0.3333333333333333"},
		{2.5e-7, "2.5e-07"},
		{123456789.123, "123456789.123"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
		{-1.5e300, "-1.5e+300"},
		{100, "100.0"},
		{1e22, "1e+22"},
		{12345678901234567890, "1.2345678901234567e+19"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
		{math.NaN(), "nan"},
	}
	for _, tt := range tests {
		if got := string(AppendFloat(nil, tt.in)); got != tt.want {
			t.Errorf("AppendFloat(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRepr: Python's repr() and str() of the plain Go values decoders give
// (maps print with their keys sorted: a Go map has no order to keep).
func TestRepr(t *testing.T) {
	deep := any("x")
	for range maxDepth + 5 {
		deep = []any{deep}
	}
	tests := []struct {
		in       any
		repr     string
		str      string // "" when it is repr
		contains bool   // repr is a prefix, not the whole (deep)
	}{
		{in: nil, repr: "None"},
		{in: true, repr: "True"},
		{in: false, repr: "False"},
		{in: "it's", repr: `"it's"`, str: "it's"},
		{in: `both ' "`, repr: `'both \' "'`, str: `both ' "`},
		{in: "nl\n", repr: `'nl\n'`, str: "nl\n"},
		{in: []byte("a'b"), repr: `b"a'b"`},
		{in: int(-3), repr: "-3"},
		{in: int8(-8), repr: "-8"},
		{in: uint16(16), repr: "16"},
		{in: uint64(math.MaxUint64), repr: "18446744073709551615"},
		{in: new(big.Int).Lsh(big.NewInt(1), 70), repr: "1180591620717411303424"},
		{in: 3.0, repr: "3.0"},
		{in: float32(0.5), repr: "0.5"},
		// Python has no float32: it holds the double the value widens to.
		{in: float32(0.1), repr: "0.10000000149011612"},
		{in: []any{"a", 1, nil, []any{}}, repr: "['a', 1, None, []]"},
		{in: []string{"a", "b'"}, repr: `['a', "b'"]`},
		{in: map[string]any{"b": 1.5, "a": []any{true}}, repr: "{'a': [True], 'b': 1.5}"},
		{in: map[string]string{"k": "v"}, repr: "{'k': 'v'}"},
		{in: map[any]any{2: "two", "1": nil}, repr: "{'1': None, 2: 'two'}"},
		{in: struct{ A int }{1}, repr: "{1}"},
		{in: deep, repr: "[[[[", contains: true},
	}
	for _, tt := range tests {
		got := Repr(tt.in)
		if tt.contains {
			if len(got) < len(tt.repr) || got[:len(tt.repr)] != tt.repr || !strings.Contains(got, "...") {
				t.Errorf("Repr(deep): got %.40q…, want a prefix %q and \"...\" past depth %d", got, tt.repr, maxDepth)
			}
			continue
		}
		if got != tt.repr {
			t.Errorf("Repr(%#v): got %s, want %s", tt.in, got, tt.repr)
		}
		want := tt.str
		if want == "" {
			want = tt.repr
		}
		if got := Str(tt.in); got != want {
			t.Errorf("Str(%#v): got %s, want %s", tt.in, got, want)
		}
	}
}
