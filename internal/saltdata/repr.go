package saltdata

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// This file is Python's repr() and str() of the values Salt holds after
// decoding msgpack (or, here, CBOR or YAML): None, bool, int, float, str,
// bytes, list and dict.

// A Seq is a sequence kept in a type of its own that prints as a Python
// list (internal/output's normalised list).
type Seq interface {
	SeqLen() int
	SeqAt(i int) any
}

// A Dict is a mapping that keeps its key order and prints as a Python dict
// in that order (internal/output's normalised dict). Plain Go maps, which
// have no order, print with their keys sorted by repr.
type Dict interface {
	DictLen() int
	DictAt(i int) (k, v any)
}

// maxDepth bounds how deeply Repr descends; deeper values print as "...".
const maxDepth = 1000

// Repr returns Python's repr() of v.
func Repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, 0)
	return b.String()
}

// Str returns Python's str() of v: a string is itself, anything else is its
// repr.
func Str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return Repr(v)
}

// AppendNumber appends v, a Go integer or float of any size, as Python's
// repr() (which is its str()) prints it, and reports whether v was one.
func AppendNumber(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int8:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case float32:
		// Python has only doubles: a float32 is the double it widens to.
		return AppendFloat(b, float64(x)), true
	case float64:
		return AppendFloat(b, x), true
	}
	return b, false
}

// AppendFloat appends f as Python's repr(float): the shortest digits that
// read back the same, in positional notation when the decimal point falls
// within 16 digits (1e-4 <= |f| < 1e16), else in exponent notation with at
// least two exponent digits; integral values keep a ".0".
func AppendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "nan"...)
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // [-]d[.ddd]e±dd
	if s[0] == '-' {
		b = append(b, '-')
		s = s[1:]
	}
	e := slices.Index(s, 'e')
	mant, expPart := s[:e], s[e+1:]
	exp, _ := strconv.Atoi(string(expPart)) // AppendFloat always writes a valid exponent
	var dig [24]byte
	digits := append(dig[:0], mant[0])
	if len(mant) > 2 {
		digits = append(digits, mant[2:]...)
	}
	decpt := exp + 1 // digits before the decimal point
	switch {
	case decpt > -4 && decpt <= 16:
		switch {
		case decpt <= 0:
			b = append(b, "0."...)
			for range -decpt {
				b = append(b, '0')
			}
			b = append(b, digits...)
		case decpt >= len(digits):
			b = append(b, digits...)
			for range decpt - len(digits) {
				b = append(b, '0')
			}
			b = append(b, ".0"...)
		default:
			b = append(b, digits[:decpt]...)
			b = append(b, '.')
			b = append(b, digits[decpt:]...)
		}
	default:
		b = append(b, digits[0])
		if len(digits) > 1 {
			b = append(b, '.')
			b = append(b, digits[1:]...)
		}
		b = append(b, 'e')
		if exp < 0 {
			b = append(b, '-')
			exp = -exp
		} else {
			b = append(b, '+')
		}
		if exp < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, int64(exp), 10)
	}
	return b
}

func writeRepr(b *strings.Builder, v any, depth int) {
	if depth > maxDepth {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		writeStrRepr(b, x)
	case []byte:
		writeBytesRepr(b, x)
	case *big.Int:
		b.WriteString(x.String())
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, depth+1)
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		writeSortedMap(b, x, depth)
	case map[string]string:
		writeSortedMap(b, x, depth)
	case map[any]any:
		// Sorted by the keys' repr; sort.Slice, not slices.SortFunc, which
		// would add a generic sort (about 7 KiB) to the agent.
		keys := make([]string, 0, len(x))
		vals := make([]any, 0, len(x))
		for k, v := range x {
			var kb strings.Builder
			writeRepr(&kb, k, depth+1)
			keys = append(keys, kb.String())
			vals = append(vals, v)
		}
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return keys[idx[a]] < keys[idx[b]] })
		b.WriteByte('{')
		for i, j := range idx {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(keys[j])
			b.WriteString(": ")
			writeRepr(b, vals[j], depth+1)
		}
		b.WriteByte('}')
	case Seq:
		b.WriteByte('[')
		for i := range x.SeqLen() {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, x.SeqAt(i), depth+1)
		}
		b.WriteByte(']')
	case Dict:
		b.WriteByte('{')
		for i := range x.DictLen() {
			if i > 0 {
				b.WriteString(", ")
			}
			k, v := x.DictAt(i)
			writeRepr(b, k, depth+1)
			b.WriteString(": ")
			writeRepr(b, v, depth+1)
		}
		b.WriteByte('}')
	default:
		var buf [40]byte
		if n, ok := AppendNumber(buf[:0], v); ok {
			b.Write(n)
			return
		}
		fmt.Fprint(b, x)
	}
}

func writeSortedMap[V any](b *strings.Builder, m map[string]V, depth int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		writeStrRepr(b, k)
		b.WriteString(": ")
		writeRepr(b, m[k], depth+1)
	}
	b.WriteByte('}')
}

// reprQuote picks the quote Python's repr uses: a single quote unless the
// text holds one and no double quote.
func reprQuote(s string) byte {
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		return '"'
	}
	return '\''
}

func writeStrRepr(b *strings.Builder, s string) {
	q := reprQuote(s)
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f || pyPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}

// pyPrintable approximates Python's str.isprintable for one character:
// everything but separators other than space, controls, format characters,
// surrogates, private use and unassigned code points. Invalid UTF-8 decodes
// to U+FFFD, which is printable.
func pyPrintable(r rune) bool {
	return unicode.IsPrint(r)
}

func writeBytesRepr(b *strings.Builder, p []byte) {
	q := reprQuote(string(p))
	b.WriteByte('b')
	b.WriteByte(q)
	for _, c := range p {
		switch {
		case c == q || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < ' ' || c >= 0x7f:
			fmt.Fprintf(b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
}
