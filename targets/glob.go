package targets

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MatchGlob reports whether name matches the shell-style pattern, with the
// semantics of Python's fnmatch.fnmatchcase that Salt uses for glob targets
// and tag matching: '*' matches any run of characters including '/', '?'
// matches one character, '[seq]' matches one character of seq, '[!seq]' one
// character not in seq. A '[' without its closing ']' matches itself.
// Characters are Unicode code points, as in Python. It allocates nothing.
func MatchGlob(pattern, name string) bool {
	return matchGlob(pattern, name, false)
}

// HasGlobMeta reports whether s contains any glob metacharacter.
func HasGlobMeta(s string) bool {
	return strings.ContainsAny(s, "*?[")
}

// matchGlob is MatchGlob; with fold, each character of name is lowercased
// before it is compared, and pattern must already be lowercased (this is
// Salt's grain matching: both sides lowered, then fnmatch).
func matchGlob(pattern, name string, fold bool) bool {
	p, n := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, w := decodeRune(name, n)
				p++
				n += w
				continue
			case '[':
				r, w := decodeRune(name, n)
				if fold {
					r = lowerRune(r)
				}
				if ok, width, valid := matchClass(pattern[p:], r); valid {
					if ok {
						p += width
						n += w
						continue
					}
				} else if name[n] == '[' {
					p++
					n++
					continue
				}
			default:
				pr, pw := decodeRune(pattern, p)
				r, w := decodeRune(name, n)
				if fold {
					r = lowerRune(r)
				}
				if pr == r {
					p += pw
					n += w
					continue
				}
			}
		}
		if starP >= 0 {
			_, w := decodeRune(name, starN)
			starN += w
			p, n = starP+1, starN
			continue
		}
		return false
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// decodeRune decodes the code point at s[i]. A byte that is not valid UTF-8
// decodes to a value outside the Unicode range that is distinct per byte, so
// that two different invalid bytes never compare equal.
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return unicode.MaxRune + 1 + rune(s[i]), 1
	}
	return r, w
}

func lowerRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	if r > unicode.MaxRune {
		return r
	}
	return unicode.ToLower(r)
}

// matchClass matches c against the bracket expression at the start of pat.
// It returns whether c matched, the width of the expression in bytes, and
// whether the expression was well formed (closed by ']').
func matchClass(pat string, c rune) (matched bool, width int, valid bool) {
	i := 1
	negate := false
	if i < len(pat) && pat[i] == '!' {
		negate = true
		i++
	}
	first := true
	for i < len(pat) {
		if pat[i] == ']' && !first {
			return matched != negate, i + 1, true
		}
		first = false
		lo, lw := decodeRune(pat, i)
		if j := i + lw; j+1 < len(pat) && pat[j] == '-' && pat[j+1] != ']' {
			hi, hw := decodeRune(pat, j+1)
			if lo <= c && c <= hi {
				matched = true
			}
			i = j + 1 + hw
			continue
		}
		if lo == c {
			matched = true
		}
		i += lw
	}
	return false, 0, false
}

// globToRegexp translates a glob into an equivalent Go regular expression
// anchored at both ends, as Python's fnmatch.translate does.
func globToRegexp(pat string) string {
	var b strings.Builder
	b.WriteString(`(?s:`)
	for i := 0; i < len(pat); {
		switch c := pat[i]; c {
		case '*':
			b.WriteString(`.*`)
			i++
		case '?':
			b.WriteString(`.`)
			i++
		case '[':
			_, width, valid := matchClass(pat[i:], 0)
			if !valid {
				b.WriteString(`\[`)
				i++
				continue
			}
			body := pat[i+1 : i+width-1]
			negate := strings.HasPrefix(body, "!")
			if negate {
				body = body[1:]
			}
			if negate == classEmpty(body) {
				b.WriteString(`[`)
			} else {
				b.WriteString(`[^`)
			}
			empty := true
			for j := 0; j < len(body); {
				lo, lw := decodeRune(body, j)
				j += lw
				if j+1 < len(body) && body[j] == '-' {
					hi, hw := decodeRune(body, j+1)
					j += 1 + hw
					if lo > hi {
						continue // Python drops empty ranges
					}
					writeRegexpRune(&b, lo)
					b.WriteByte('-')
					writeRegexpRune(&b, hi)
				} else {
					writeRegexpRune(&b, lo)
				}
				empty = false
			}
			if empty {
				// An empty class matches nothing, its negation any
				// character: both are written as a complement of everything
				// or of nothing.
				b.WriteString(`\x{0}-\x{10FFFF}`)
			}
			b.WriteByte(']')
			i += width
		default:
			r, w := decodeRune(pat, i)
			writeRegexpRune(&b, r)
			i += w
		}
	}
	b.WriteString(`)\z`)
	return b.String()
}

// writeRegexpRune writes r as a regexp literal that holds no whitespace.
func writeRegexpRune(b *strings.Builder, r rune) {
	switch {
	case r > unicode.MaxRune:
		b.WriteString(`\x{FFFD}`)
	case unicode.IsSpace(r) || r < 0x20 || r == 0x7f:
		b.WriteString(`\x{`)
		b.WriteString(strings.ToUpper(formatHex(r)))
		b.WriteByte('}')
	case r < utf8.RuneSelf && strings.ContainsRune(`\.+*?()|[]{}^$-`, r):
		b.WriteByte('\\')
		b.WriteRune(r)
	default:
		b.WriteRune(r)
	}
}

func formatHex(r rune) string {
	const digits = "0123456789abcdef"
	if r == 0 {
		return "0"
	}
	var buf [8]byte
	i := len(buf)
	for r > 0 {
		i--
		buf[i] = digits[r&0xf]
		r >>= 4
	}
	return string(buf[i:])
}

// classEmpty reports whether a bracket expression body (without its '[',
// '!' and ']') holds no character once empty ranges are dropped.
func classEmpty(body string) bool {
	for j := 0; j < len(body); {
		lo, lw := decodeRune(body, j)
		j += lw
		if j+1 < len(body) && body[j] == '-' {
			hi, hw := decodeRune(body, j+1)
			j += 1 + hw
			if lo > hi {
				continue
			}
		}
		return false
	}
	return true
}
