package state

import (
	"strings"
	"unicode/utf8"
)

// wild matches "*" and "?" without allocating: the greedy algorithm with
// one backtracking point, linear for most patterns and O(len(pat) *
// len(name)) at worst.
func wild(name, pat string) bool {
	n, p := 0, 0
	starP, starN := -1, 0
	for n < len(name) {
		if p < len(pat) {
			switch pat[p] {
			case '*':
				starP, starN = p, n
				p++
				continue
			case '?':
				_, w := utf8.DecodeRuneInString(name[n:])
				n += w
				p++
				continue
			default:
				if pat[p] == name[n] {
					n++
					p++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starN++
		for starN < len(name) && !utf8.RuneStart(name[starN]) {
			starN++
		}
		n, p = starN, starP+1
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// fnmatch is Python's fnmatch.fnmatch on POSIX: "*" matches anything
// (dots and slashes too), "?" one character, "[seq]" and "[!seq]" a set;
// an unclosed "[" is a literal. It runs in O(len(pat)*len(name)).
func fnmatch(name, pat string) bool {
	if !strings.ContainsRune(pat, '[') {
		return wild(name, pat)
	}
	n, p := []rune(name), []rune(pat)
	// prev[j]: pattern p[:i] matches n[:j].
	prev := make([]bool, len(n)+1)
	cur := make([]bool, len(n)+1)
	prev[0] = true
	for i := 0; i < len(p); {
		for j := range cur {
			cur[j] = false
		}
		switch p[i] {
		case '*':
			seen := false
			for j := 0; j <= len(n); j++ {
				seen = seen || prev[j]
				cur[j] = seen
			}
			i++
		case '?':
			for j := 1; j <= len(n); j++ {
				cur[j] = prev[j-1]
			}
			i++
		case '[':
			end, neg, set := class(p, i)
			if end < 0 {
				for j := 1; j <= len(n); j++ {
					cur[j] = prev[j-1] && n[j-1] == '['
				}
				i++
				break
			}
			for j := 1; j <= len(n); j++ {
				cur[j] = prev[j-1] && set(n[j-1]) != neg
			}
			i = end
		default:
			c := p[i]
			for j := 1; j <= len(n); j++ {
				cur[j] = prev[j-1] && n[j-1] == c
			}
			i++
		}
		prev, cur = cur, prev
	}
	return prev[len(n)]
}

// class reads a "[...]" set at p[i]: the index after it (-1 if unclosed),
// whether it is negated, and its test.
func class(p []rune, i int) (int, bool, func(rune) bool) {
	j := i + 1
	neg := false
	if j < len(p) && p[j] == '!' {
		neg = true
		j++
	}
	start := j
	if j < len(p) && p[j] == ']' {
		j++
	}
	for j < len(p) && p[j] != ']' {
		j++
	}
	if j >= len(p) {
		return -1, false, nil
	}
	body := p[start:j]
	return j + 1, neg, func(r rune) bool {
		for k := 0; k < len(body); k++ {
			if k+2 < len(body) && body[k+1] == '-' {
				if body[k] <= r && r <= body[k+2] {
					return true
				}
				k += 2
				continue
			}
			if body[k] == r {
				return true
			}
		}
		return false
	}
}

// fnfilter is fnmatch.filter: the names that match pat, in order.
func fnfilter(names []string, pat string) []string {
	var out []string
	for _, n := range names {
		if fnmatch(n, pat) {
			out = append(out, n)
		}
	}
	return out
}

// Fnmatch is Python's fnmatch.fnmatchcase: "*" matches anything, "/"
// included; "?" one character; [seq] and [!seq].
func Fnmatch(name, pat string) bool { return fnmatch(name, pat) }
