package output

import (
	"strings"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// This file renders normalised values as Python would: Python's
// str.splitlines, and pprint.pformat for txt's non-dict case. repr() and
// str() are internal/saltdata's Repr and Str (list and *dict are its Seq and
// Dict).

// splitLines splits s as Python's str.splitlines does: at \n, \r, \r\n,
// \v, \f, \x1c, \x1d, \x1e, \x85, U+2028 and U+2029, with no empty line after
// a final line break, so "" has no lines at all.
func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			lines = append(lines, s[start:i])
			i += size
			if r == '\r' && i < len(s) && s[i] == '\n' {
				i++
			}
			start = i
			continue
		}
		i += size
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	return lines
}

// splitByteLines splits p as Python's bytes.splitlines does: at \n, \r and
// \r\n only.
func splitByteLines(p []byte) [][]byte {
	var lines [][]byte
	start := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '\n' && p[i] != '\r' {
			continue
		}
		lines = append(lines, p[start:i])
		if p[i] == '\r' && i+1 < len(p) && p[i+1] == '\n' {
			i++
		}
		start = i + 1
	}
	if start < len(p) {
		lines = append(lines, p[start:])
	}
	return lines
}

// pprintWidth is pprint's default line width.
const pprintWidth = 80

// pyPformat returns pprint.pformat(v): the repr when it fits in 80
// columns, else dicts and lists broken one item a line, dict keys sorted.
// Unlike pprint, it does not split long strings or bytes into adjacent
// literals.
func pyPformat(v any) string { return pyPformatIndent(v, 1) }

// pyPformatIndent is pprint.pformat(v, indent=per).
func pyPformatIndent(v any, per int) string {
	var b strings.Builder
	pf := pformatter{per: per}
	pf.format(&b, sortDicts(v), 0, 0)
	return b.String()
}

// sortDicts returns v with every dict's keys sorted, as pprint prints them.
func sortDicts(v any) any {
	switch x := v.(type) {
	case *dict:
		x = x.sorted()
		s := &dict{keys: x.keys, vals: make([]any, len(x.vals))}
		for i, e := range x.vals {
			s.vals[i] = sortDicts(e)
		}
		return s
	case list:
		s := make(list, len(x))
		for i, e := range x {
			s[i] = sortDicts(e)
		}
		return s
	}
	return v
}

// pformatter follows pprint.PrettyPrinter's _format, _pprint_dict and
// _pprint_list, per being its indent per level.
type pformatter struct{ per int }

func (pf pformatter) format(b *strings.Builder, v any, indent, allowance int) {
	rep := saltdata.Repr(v)
	if utf8.RuneCountInString(rep) <= pprintWidth-indent-allowance {
		b.WriteString(rep)
		return
	}
	pad := strings.Repeat(" ", max(pf.per-1, 0))
	switch x := v.(type) {
	case *dict:
		if len(x.keys) == 0 {
			break
		}
		b.WriteByte('{')
		b.WriteString(pad)
		indent += pf.per
		for i, k := range x.keys {
			last := i == len(x.keys)-1
			krep := saltdata.Repr(k)
			b.WriteString(krep)
			b.WriteString(": ")
			a := 1
			if last {
				a = allowance + 1
			}
			pf.format(b, x.vals[i], indent+utf8.RuneCountInString(krep)+2, a)
			if !last {
				b.WriteString(",\n")
				b.WriteString(strings.Repeat(" ", indent))
			}
		}
		b.WriteByte('}')
		return
	case list:
		if len(x) == 0 {
			break
		}
		b.WriteByte('[')
		b.WriteString(pad)
		indent += pf.per
		for i, e := range x {
			last := i == len(x)-1
			a := 1
			if last {
				a = allowance + 1
			}
			pf.format(b, e, indent, a)
			if !last {
				b.WriteString(",\n")
				b.WriteString(strings.Repeat(" ", indent))
			}
		}
		b.WriteByte(']')
		return
	}
	b.WriteString(rep)
}
