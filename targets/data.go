package targets

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unsafe"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// Grain and pillar matching follows Salt's salt.utils.data.subdict_match:
//
//   - "a:b:c" is split on the delimiter and tried from the longest key to the
//     shortest: data[a][b] against "c", then data[a] against "b:c", so a
//     value may itself hold the delimiter (G@ipv6:fe80::1).
//   - A key "*" stands for the whole data; "*:" before a pattern searches it
//     one level down in every value.
//   - Keys are followed as traverse_dict_and_list does (saltdata.Step): a
//     list is indexed by a number (ipv4:0) or through the maps it holds, a
//     map by the key or its integer form. A list matches when any element
//     matches.
//   - When the key leads to a map, the value part matches if it is "*", a
//     key of that map, or a nested key:value in it.
//   - Values are compared as Python prints them (True, None, 3.0) and both
//     sides are lowercased: grain and pillar matching ignores case, unlike
//     glob and pcre on the minion id.

type dataMode uint8

const (
	modeGlob dataMode = iota
	modeRegex
	modeExact
)

// dataNode is a grain, grain_pcre, pillar, pillar_pcre or pillar_exact term.
type dataNode struct {
	kind   string
	pillar bool
	mode   dataMode
	delim  string
	expr   string
	top    []cand // candidates split on delim
}

// pat is one pattern string that a value may be matched against, compiled
// for the node's mode, with what _dict_match needs to recurse.
type pat struct {
	raw    string
	hash   uint32         // keyHash(raw), to look raw up as a key in an index
	low    string         // lowered, for glob
	lit    bool           // low has no glob metacharacter
	prefix string         // low is prefix + "*", prefix holding no metacharacter
	re     *regexp.Regexp // for regex mode; nil when raw does not compile
	sub    []cand         // raw split on ":" (the recursion in Salt always uses ":")
	wild   *pat           // raw starts with "*:": the rest
}

// cand is one way to split a pattern into a key path and a value pattern.
type cand struct {
	key []keyPart // nil: the key was "*", match the whole data
	m   *pat
}

// keyPart is one key of a path, with its reading as an integer worked out
// at compile time (saltdata.ParseKey), so that matching neither parses nor
// allocates.
type keyPart struct {
	saltdata.Key
	hash uint32 // keyHash(S)
}

func keyParts(ss []string) []keyPart {
	ks := make([]keyPart, len(ss))
	for i, s := range ss {
		ks[i] = keyPart{Key: saltdata.ParseKey(s), hash: keyHash(s)}
	}
	return ks
}

type patBuilder struct {
	mode dataMode
	memo map[string]*pat
	bad  string // first pattern that did not compile, and why
	err  error
}

const maxPats = 4096

func (pb *patBuilder) get(raw string) *pat {
	if p, ok := pb.memo[raw]; ok {
		return p
	}
	p := &pat{raw: raw, hash: keyHash(raw)}
	pb.memo[raw] = p
	switch pb.mode {
	case modeGlob:
		p.low = strings.ToLower(raw)
		p.lit = !HasGlobMeta(p.low)
		if pre, ok := strings.CutSuffix(p.low, "*"); ok && pre != "" && !HasGlobMeta(pre) {
			p.prefix = pre
		}
	case modeRegex:
		re, err := regexp.Compile(`(?i)^(?:` + raw + `)`)
		if err != nil {
			if pb.err == nil {
				pb.bad, pb.err = raw, err
			}
		} else {
			p.re = re
		}
	}
	if len(pb.memo) > maxPats {
		return p
	}
	if strings.HasPrefix(raw, "*:") {
		p.wild = pb.get(raw[2:])
	}
	p.sub = pb.cands(p, DefaultDelimiter)
	return p
}

// cands splits p.raw on delim as subdict_match does.
func (pb *patBuilder) cands(p *pat, delim string) []cand {
	splits := strings.Split(p.raw, delim)
	if len(splits) < 2 {
		return nil
	}
	cs := make([]cand, 0, len(splits)-1)
	for idx := len(splits) - 1; idx >= 1; idx-- {
		if idx == 1 && splits[0] == "*" {
			cs = append(cs, cand{key: nil, m: p})
			continue
		}
		cs = append(cs, cand{key: keyParts(splits[:idx]), m: pb.get(strings.Join(splits[idx:], delim))})
	}
	return cs
}

var dataLetters = map[string]string{
	"grain": "G", "grain_pcre": "P", "pillar": "I", "pillar_pcre": "J", "pillar_exact": "I",
}

// newData compiles a grain or pillar term; pos is where pattern starts in
// expr, for errors.
func newData(kind, pattern, delim, expr string, pos int) (*dataNode, error) {
	n := &dataNode{kind: kind, pillar: strings.HasPrefix(kind, "pillar"), delim: delim, expr: pattern}
	switch kind {
	case "grain_pcre", "pillar_pcre":
		n.mode = modeRegex
	case "pillar_exact":
		n.mode = modeExact
	}
	i := strings.Index(pattern, delim)
	if i < 0 {
		what := "grain"
		if n.pillar {
			what = "pillar"
		}
		return nil, &SyntaxError{Expr: expr, Pos: pos + len(pattern), Msg: fmt.Sprintf("expected %s key%svalue, no %q in %q", what, delim, delim, pattern)}
	}
	if strings.Count(pattern, delim) > maxKeyParts || strings.Count(pattern, DefaultDelimiter) > maxKeyParts {
		return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: fmt.Sprintf("expected at most %d nested keys", maxKeyParts)}
	}
	pb := &patBuilder{mode: n.mode, memo: map[string]*pat{}}
	root := pb.get(pattern)
	if delim == DefaultDelimiter {
		n.top = root.sub
	} else {
		n.top = pb.cands(root, delim)
	}
	if n.mode == modeRegex {
		ok := false
		for _, c := range n.top {
			if c.m.re != nil {
				ok = true
			}
		}
		if !ok {
			last := strings.LastIndex(pattern, delim) + len(delim)
			return nil, &SyntaxError{Expr: expr, Pos: pos + last, Msg: "expected a regular expression: " + reErrMsg(pb.bad, pb.err)}
		}
	}
	return n, nil
}

func (n *dataNode) match(mn *Minion) bool {
	if !n.pillar && mn.Index != nil {
		return mn.Index.subdictMatch(0, n.top, n.mode)
	}
	data := mn.Grains
	if n.pillar {
		data = mn.Pillar
	}
	if data == nil {
		return false
	}
	return subdictMatch(data, n.top, n.mode)
}

func (n *dataNode) weight() int { return 1 }

func (n *dataNode) format(b *strings.Builder) {
	b.WriteString(dataLetters[n.kind])
	expr := n.expr
	switch {
	case n.delim == DefaultDelimiter:
		// "G@" + expr is read back with an explicit delimiter when expr's
		// second character is '@' ("P@@:0"): then write the ':' out.
		if _, d, _, _ := splitEngine("G@" + expr); d != "" {
			b.WriteString(DefaultDelimiter)
		}
	case len([]rune(n.delim)) == 1:
		b.WriteString(n.delim)
	default:
		// Compound syntax takes a one-character delimiter: use one that the
		// expression does not hold, which splits it the same way.
		for _, r := range "|#;~!%^&=+/,." {
			if !strings.ContainsRune(expr, r) {
				b.WriteRune(r)
				expr = strings.ReplaceAll(expr, n.delim, string(r))
				break
			}
		}
	}
	b.WriteByte('@')
	if n.mode == modeExact {
		// pillar_exact has no compound letter: a glob whose metacharacters
		// are bracketed is the same test, unless a key holds one.
		expr = strings.NewReplacer("*", "[*]", "?", "[?]", "[", "[[]").Replace(expr)
	}
	b.WriteString(expr)
}

// subdictMatch is Salt's subdict_match over precomputed candidates.
func subdictMatch(data any, cs []cand, mode dataMode) bool {
	for _, c := range cs {
		v := data
		if c.key != nil {
			var ok bool
			if v, ok = traverse(data, c.key); !ok {
				continue
			}
		}
		if foundMatch(v, c.m, mode) {
			return true
		}
	}
	return false
}

// foundMatch is the rest of subdictMatch for one candidate, once its key
// has led to v: a map matches by _dict_match, a list when an element
// matches, anything else by its str().
func foundMatch(v any, p *pat, mode dataMode) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) > 0 && dictMatch(x, p, mode)
	case map[any]any:
		return len(x) > 0 && dictMatch(x, p, mode)
	case map[string]string:
		return len(x) > 0 && dictMatch(x, p, mode)
	case []any:
		for _, e := range x {
			if saltdata.IsMap(e) && dictMatch(e, p, mode) {
				return true
			}
			if matchValue(e, p, mode) {
				return true
			}
		}
		return false
	case []string:
		for _, e := range x {
			if matchString(e, p, mode) {
				return true
			}
		}
		return false
	}
	return matchValue(v, p, mode)
}

// dictMatch is Salt's _dict_match: d is a map saltdata.IsMap.
func dictMatch(d any, p *pat, mode dataMode) bool {
	q := p
	if p.wild != nil {
		q = p.wild
	}
	if q.raw == "*" {
		return true
	}
	if _, ok := saltdata.Get(d, saltdata.Key{S: q.raw}); ok {
		return true
	}
	if q.sub != nil && subdictMatch(d, q.sub, mode) {
		return true
	}
	if p.wild == nil {
		return false
	}
	check := func(v any) bool {
		switch x := v.(type) {
		case map[string]any, map[any]any, map[string]string:
			return dictMatch(x, q, mode)
		case []any:
			for _, e := range x {
				if matchValue(e, q, mode) {
					return true
				}
			}
			return false
		case []string:
			for _, e := range x {
				if matchString(e, q, mode) {
					return true
				}
			}
			return false
		}
		return matchValue(v, q, mode)
	}
	switch m := d.(type) {
	case map[string]any:
		for _, v := range m {
			if check(v) {
				return true
			}
		}
	case map[any]any:
		for _, v := range m {
			if check(v) {
				return true
			}
		}
	case map[string]string:
		for _, v := range m {
			if check(v) {
				return true
			}
		}
	}
	return false
}

// traverse is Salt's traverse_dict_and_list over a compiled path.
func traverse(data any, key []keyPart) (any, bool) {
	ptr := data
	for _, k := range key {
		var ok bool
		if ptr, ok = saltdata.Step(ptr, k.Key); !ok {
			return nil, false
		}
	}
	return ptr, true
}

// matchValue is Salt's _match: str(v).lower() against the pattern.
func matchValue(v any, p *pat, mode dataMode) bool {
	switch x := v.(type) {
	case string:
		return matchString(x, p, mode)
	case bool:
		if x {
			return matchString("True", p, mode)
		}
		return matchString("False", p, mode)
	case nil:
		return matchString("None", p, mode)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		if mode == modeRegex {
			if p.re == nil {
				return false
			}
			var buf [40]byte
			n, _ := saltdata.AppendNumber(buf[:0], v)
			return p.re.Match(bytes.Clone(n))
		}
		return matchNumber(v, p, mode)
	}
	return matchString(saltdata.Str(v), p, mode)
}

// matchNumber formats v into a stack buffer and matches it without
// allocating; the string does not outlive the call.
func matchNumber(v any, p *pat, mode dataMode) bool {
	var buf [40]byte
	b, _ := saltdata.AppendNumber(buf[:0], v)
	s := unsafe.String(unsafe.SliceData(b), len(b))
	return matchText(s, p, mode)
}

func matchString(s string, p *pat, mode dataMode) bool {
	if mode == modeRegex {
		return p.re != nil && p.re.MatchString(s)
	}
	return matchText(s, p, mode)
}

// matchText matches s in glob or exact mode; it retains nothing of s.
func matchText(s string, p *pat, mode dataMode) bool {
	switch mode {
	case modeExact:
		return strings.EqualFold(s, p.raw)
	case modeGlob:
		if p.lit {
			return foldEqual(p.low, s)
		}
		return matchGlob(p.low, s, true)
	}
	return false
}

// foldEqual reports whether s lowercased equals low.
func foldEqual(low, s string) bool {
	i, j := 0, 0
	for i < len(low) && j < len(s) {
		a, aw := decodeRune(low, i)
		c, cw := decodeRune(s, j)
		if a != lowerRune(c) {
			return false
		}
		i += aw
		j += cw
	}
	return i == len(low) && j == len(s)
}
