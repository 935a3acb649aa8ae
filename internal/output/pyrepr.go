package output

import (
	"strings"
	"unicode"
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
// columns, else dicts and lists broken one item a line, dict keys sorted,
// and long strings and bytes split into adjacent literals.
func pyPformat(v any) string { return pyPformatIndent(v, 1) }

// pyPformatIndent is pprint.pformat(v, indent=per).
func pyPformatIndent(v any, per int) string {
	var b strings.Builder
	pf := pformatter{per: per}
	pf.format(&b, sortDicts(v), 0, 0, 1)
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

// pformatter follows pprint.PrettyPrinter's _format, _pprint_dict,
// _pprint_list, _pprint_str and _pprint_bytes (Lib/pprint.py), per being
// its indent per level. level is 1 for the value pformat was given, whose
// split strings and bytes alone go in parentheses.
type pformatter struct{ per int }

func (pf pformatter) format(b *strings.Builder, v any, indent, allowance, level int) {
	rep := saltdata.Repr(v)
	if utf8.RuneCountInString(rep) <= pprintWidth-indent-allowance {
		b.WriteString(rep)
		return
	}
	pad := strings.Repeat(" ", max(pf.per-1, 0))
	switch x := v.(type) {
	case string:
		writeChunks(b, strChunks(x, indent, allowance, level), indent, level)
		return
	case []byte:
		if len(x) <= 4 {
			break
		}
		writeChunks(b, byteChunks(x, indent, allowance, level), indent, level)
		return
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
			pf.format(b, x.vals[i], indent+utf8.RuneCountInString(krep)+2, a, level+1)
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
			pf.format(b, e, indent, a, level+1)
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

// writeChunks writes the adjacent literals of a split string or bytes, one
// a line under the first, in parentheses at the top level.
func writeChunks(b *strings.Builder, chunks []string, indent, level int) {
	if len(chunks) == 1 {
		b.WriteString(chunks[0])
		return
	}
	if level == 1 {
		b.WriteByte('(')
		indent++
	}
	for i, c := range chunks {
		if i > 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent))
		}
		b.WriteString(c)
	}
	if level == 1 {
		b.WriteByte(')')
	}
}

// strChunks splits s as pprint's _pprint_str does: a literal per line
// (line breaks kept), and a line whose literal is too wide split after
// runs of whitespace, never inside a word, into literals that fit.
func strChunks(s string, indent, allowance, level int) []string {
	if level == 1 {
		indent++
		allowance++
	}
	width := pprintWidth - indent
	width1 := width
	lines := splitLinesKeepEnds(s)
	var chunks []string
	for i, line := range lines {
		lastLine := i == len(lines)-1
		if lastLine {
			width1 -= allowance
		}
		if rep := saltdata.Repr(line); utf8.RuneCountInString(rep) <= width1 {
			chunks = append(chunks, rep)
			continue
		}
		parts := spaceParts(line)
		width2 := width
		current := ""
		for j, part := range parts {
			candidate := current + part
			if j == len(parts)-1 && lastLine {
				width2 -= allowance
			}
			if utf8.RuneCountInString(saltdata.Repr(candidate)) > width2 {
				if current != "" {
					chunks = append(chunks, saltdata.Repr(current))
				}
				current = part
			} else {
				current = candidate
			}
		}
		if current != "" {
			chunks = append(chunks, saltdata.Repr(current))
		}
	}
	return chunks
}

// byteChunks splits p as pprint's _wrap_bytes_repr does: in runs of four
// bytes, as many to a literal as fit. As there, the allowance counts only
// when the last run is shorter than four bytes.
func byteChunks(p []byte, indent, allowance, level int) []string {
	if level == 1 {
		indent++
		allowance++
	}
	width := pprintWidth - indent
	last := len(p) / 4 * 4
	var chunks []string
	var current []byte
	for i := 0; i < len(p); i += 4 {
		part := p[i:min(i+4, len(p))]
		candidate := append(current[:len(current):len(current)], part...)
		if i == last {
			width -= allowance
		}
		if utf8.RuneCountInString(saltdata.Repr(candidate)) > width {
			if len(current) > 0 {
				chunks = append(chunks, saltdata.Repr(current))
			}
			current = part
		} else {
			current = candidate
		}
	}
	if len(current) > 0 {
		chunks = append(chunks, saltdata.Repr(current))
	}
	return chunks
}

// splitLinesKeepEnds is Python's str.splitlines(True): splitLines with
// each line keeping its line break.
func splitLinesKeepEnds(s string) []string {
	var lines []string
	for _, l := range splitLines(s) {
		end := len(l)
		if end < len(s) {
			r, size := utf8.DecodeRuneInString(s[end:])
			end += size
			if r == '\r' && end < len(s) && s[end] == '\n' {
				end++
			}
		}
		lines = append(lines, s[:end])
		s = s[end:]
	}
	return lines
}

// spaceParts splits s as re.findall(r'\S*\s*', s) does, less its final
// empty match: each part a run of non-space then a run of space.
func spaceParts(s string) []string {
	var parts []string
	for len(s) > 0 {
		i := strings.IndexFunc(s, pySpace)
		if i < 0 {
			return append(parts, s)
		}
		j := strings.IndexFunc(s[i:], func(r rune) bool { return !pySpace(r) })
		if j < 0 {
			return append(parts, s)
		}
		parts = append(parts, s[:i+j])
		s = s[i+j:]
	}
	return parts
}

// pySpace is Python's str.isspace for one character: Go's unicode.IsSpace
// and the separators \x1c to \x1f.
func pySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}
