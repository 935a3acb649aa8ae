package output

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// renderJSON renders like Salt's json_out: Python's json.dumps with
// ensure_ascii off, keys in the data's order (an Ordered's, else sorted),
// indented 4 unless opts sets output_indent; values JSON cannot hold (bytes) become their Python repr, as
// json_out's default=repr does.
func renderJSON(v any, opts Options) (string, error) {
	indent := 4 // json_out without output_indent
	if opts.IndentSet {
		indent = opts.Indent // 0: a line per item, not indented; < 0: one line
	}
	j := &jsonWriter{indent: indent}
	j.value(v, 0)
	return j.b.String(), nil
}

type jsonWriter struct {
	indent int // < 0: one line
	b      strings.Builder
}

// newline writes what comes before an item at depth: a newline and indent,
// or nothing on one line.
func (j *jsonWriter) newline(depth int) {
	if j.indent < 0 {
		return
	}
	j.b.WriteByte('\n')
	j.b.WriteString(strings.Repeat(" ", j.indent*depth))
}

func (j *jsonWriter) itemSep() {
	if j.indent < 0 {
		j.b.WriteString(", ")
		return
	}
	j.b.WriteByte(',')
}

func (j *jsonWriter) value(v any, depth int) {
	switch x := v.(type) {
	case nil:
		j.b.WriteString("null")
	case bool:
		j.b.WriteString(strconv.FormatBool(x))
	case int64, uint64, *big.Int:
		j.b.WriteString(saltdata.Repr(x))
	case float64:
		j.b.WriteString(jsonFloat(x))
	case string:
		writeJSONString(&j.b, x)
	case list:
		if len(x) == 0 {
			j.b.WriteString("[]")
			return
		}
		j.b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				j.itemSep()
			}
			j.newline(depth + 1)
			j.value(e, depth+1)
		}
		j.newline(depth)
		j.b.WriteByte(']')
	case *dict:
		if len(x.keys) == 0 {
			j.b.WriteString("{}")
			return
		}
		j.b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				j.itemSep()
			}
			j.newline(depth + 1)
			writeJSONString(&j.b, jsonKey(k))
			j.b.WriteString(": ")
			j.value(x.vals[i], depth+1)
		}
		j.newline(depth)
		j.b.WriteByte('}')
	default:
		writeJSONString(&j.b, saltdata.Repr(x))
	}
}

// jsonFloat is Python's json float form: repr, with NaN and the infinities
// spelled as JavaScript does.
func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return string(saltdata.AppendFloat(nil, f))
}

// jsonKey converts a map key to the string Python's json makes of it.
func jsonKey(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return jsonFloat(x)
	}
	return saltdata.Repr(k)
}

// writeJSONString quotes s as Python's json does with ensure_ascii off:
// only the quote, backslash and control characters are escaped.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
				continue
			}
			b.WriteRune(r) // invalid UTF-8 comes out as U+FFFD
		}
	}
	b.WriteByte('"')
}
