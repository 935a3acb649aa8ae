package targets

import (
	"cmp"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/halite-fleet/halite/internal/saltdata"
)

// Grains is a minion's grains flattened once into a compact form that
// grain and ipcidr terms read instead of the maps (see Minion.Index).
//
// Matching a target against a large fleet is bound by memory latency, not
// by comparing strings: the maps, slices and strings of one minion's grains
// are many small allocations scattered over the heap, and each costs a cache
// miss. A Grains holds the same tree in three contiguous arrays: the nodes
// (a map's entries sorted by key, a list's elements, each block of siblings
// adjacent), one string holding every key and value, and the addresses of
// the ipv4 and ipv6 grains already parsed. Values are stored as Salt
// compares them: Python's str() of numbers, booleans and None (3.0, True,
// None), and lowercased beside the original when lowering changes them.
//
// A Grains is immutable and safe for concurrent use. It does not refer to
// the map it was built from.
type Grains struct {
	// nodes, addrs and text share one allocation, which holds no pointers.
	hash  []uint32 // hash[i] is keyHash of nodes[i]'s key: a map's hashes share a cache line or two
	nodes []gnode
	addrs []gaddr // parsed ipv4 grain, then parsed ipv6 grain
	text  string  // every key and value, sliced by the nodes
	n4    int     // len of the ipv4 part of addrs
	size  int
}

type gkind uint8

const (
	gText gkind = iota // a scalar, or a value matching cannot look into
	gMap
	gList
)

// gnode is one value of the tree. A map's entries are nodes whose key is
// set; the string keys come first, sorted by hash then key, so that a
// lookup compares hashes and reads one key from the text.
type gnode struct {
	kind gkind
	skey bool // a map entry whose key is a string (map[any]any may hold others)
	key  span
	txt  span // str() of the value; for a map or list only when it is a list element
	low  span // txt lowercased, as grain globs compare
	kid  uint32
	n    uint32 // children: a map's entries or a list's elements, at nodes[kid:kid+n]
	nkey uint32 // a map's entries with a string key, at nodes[kid:kid+nkey]
}

type span struct{ off, len uint32 }

// gaddr is a parsed address without pointers (a netip.Addr holds one, for
// its zone), so that it can share the nodes' allocation.
type gaddr struct {
	b    [16]byte
	zone span
	is4  bool
}

// addr returns a without its zone.
func (a *gaddr) addr() netip.Addr {
	if a.is4 {
		return netip.AddrFrom4([4]byte(a.b[:4]))
	}
	return netip.AddrFrom16(a.b)
}

// maxIndexDepth bounds the nesting Index flattens; deeper grains are left
// to the map walk.
const maxIndexDepth = 128

// Index flattens grains for matching. It returns nil for nil grains, and
// for grains nested deeper than matching needs to be fast for (more than
// 128 levels) or larger than 4 GiB, which the matcher then walks as maps.
func Index(grains map[string]any) *Grains {
	if grains == nil {
		return nil
	}
	b := &indexer{nodes: make([]gnode, 1, 1+2*len(grains))}
	if !b.fill(0, grains, 0, false) {
		return nil
	}
	var addrs []gaddr
	n4 := 0
	for _, grain := range [...]string{"ipv4", "ipv6"} {
		appendAddr := func(s string) {
			a, err := netip.ParseAddr(s)
			if err != nil {
				return
			}
			ga := gaddr{b: a.As16(), is4: a.Is4()}
			if a.Is4() {
				v4 := a.As4()
				ga.b = [16]byte{}
				copy(ga.b[:], v4[:])
			}
			if z := a.Zone(); z != "" {
				ga.zone = b.add(z)
			}
			addrs = append(addrs, ga)
		}
		switch v := grains[grain].(type) {
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					appendAddr(s)
				}
			}
		case []string:
			for _, s := range v {
				appendAddr(s)
			}
		case string:
			appendAddr(v)
		}
		if grain == "ipv4" {
			n4 = len(addrs)
		}
	}
	if uint64(len(b.text)) > math.MaxUint32 || uint64(len(b.nodes)) > math.MaxUint32 {
		return nil
	}
	// One allocation, 8-byte aligned, without pointers: key hashes,
	// nodes, addresses, text.
	hashBytes := 4 * len(b.nodes)
	nodeBytes := len(b.nodes) * int(unsafe.Sizeof(gnode{}))
	addrBytes := len(addrs) * int(unsafe.Sizeof(gaddr{}))
	total := hashBytes + nodeBytes + addrBytes + len(b.text)
	mem := make([]uint64, (total+7)/8)
	base := unsafe.Pointer(unsafe.SliceData(mem))
	g := &Grains{n4: n4, size: int(unsafe.Sizeof(Grains{})) + 8*len(mem)}
	g.hash = unsafe.Slice((*uint32)(base), len(b.nodes))
	for i := range b.nodes {
		if b.nodes[i].skey {
			g.hash[i] = keyHash(b.str(b.nodes[i].key))
		}
	}
	base = unsafe.Add(base, hashBytes)
	g.nodes = unsafe.Slice((*gnode)(base), len(b.nodes))
	copy(g.nodes, b.nodes)
	// Empty parts are left nil: a pointer just past the allocation must
	// not be made.
	if len(addrs) > 0 {
		g.addrs = unsafe.Slice((*gaddr)(unsafe.Add(base, nodeBytes)), len(addrs))
		copy(g.addrs, addrs)
	}
	if len(b.text) > 0 {
		text := unsafe.Slice((*byte)(unsafe.Add(base, nodeBytes+addrBytes)), len(b.text))
		copy(text, b.text)
		g.text = unsafe.String(unsafe.SliceData(text), len(text)) // never written again
	}
	return g
}

// Size returns the bytes the index occupies, for reporting.
func (g *Grains) Size() int { return g.size }

type indexer struct {
	nodes []gnode
	text  []byte
}

func (b *indexer) str(s span) string { return string(b.text[s.off : s.off+s.len]) }

func (b *indexer) add(s string) span {
	sp := span{uint32(len(b.text)), uint32(len(s))}
	b.text = append(b.text, s...)
	return sp
}

// addText sets node i's text and lowered text to s.
func (b *indexer) addText(i int, s string) {
	b.nodes[i].txt = b.add(s)
	b.nodes[i].low = b.nodes[i].txt
	if !needsLower(s) {
		return
	}
	start := len(b.text)
	b.text = appendLower(b.text, s)
	if string(b.text[start:]) == s {
		b.text = b.text[:start]
		return
	}
	b.nodes[i].low = span{uint32(start), uint32(len(b.text) - start)}
}

func needsLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// appendLower appends s with each code point lowered as matchGlob(fold)
// lowers it; bytes that are not UTF-8 are kept as they are, so that the
// result decodes (decodeRune) to the lowered sequence of s.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, w := decodeRune(s, i)
		if r > utf8.MaxRune {
			b = append(b, s[i])
		} else {
			b = utf8.AppendRune(b, lowerRune(r))
		}
		i += w
	}
	return b
}

// fill stores v at node i; elem says v is a list element, whose str()
// matching may compare even when it is a map or a list.
func (b *indexer) fill(i int, v any, depth int, elem bool) bool {
	if depth > maxIndexDepth {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		kid := b.block(i, gMap, len(keys))
		b.nodes[i].nkey = uint32(len(keys))
		for j, k := range keys {
			b.setKey(kid+j, k)
			if !b.fill(kid+j, x[k], depth+1, false) {
				return false
			}
		}
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sortKeys(keys)
		kid := b.block(i, gMap, len(keys))
		b.nodes[i].nkey = uint32(len(keys))
		for j, k := range keys {
			b.setKey(kid+j, k)
			b.addText(kid+j, x[k])
		}
	case map[any]any:
		keys := make([]string, 0, len(x))
		var other []any
		for k := range x {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			} else {
				other = append(other, k)
			}
		}
		sortKeys(keys)
		kid := b.block(i, gMap, len(x))
		b.nodes[i].nkey = uint32(len(keys))
		for j, k := range keys {
			b.setKey(kid+j, k)
			if !b.fill(kid+j, x[k], depth+1, false) {
				return false
			}
		}
		for j, k := range other {
			if isInt(k) {
				// Kept for traverse's integer retry: its decimal text,
				// not a string key (skey stays false).
				n, _ := saltdata.AppendNumber(nil, k)
				b.nodes[kid+len(keys)+j].key = b.add(string(n))
			}
			if !b.fill(kid+len(keys)+j, x[k], depth+1, false) {
				return false
			}
		}
	case []any:
		kid := b.block(i, gList, len(x))
		for j, e := range x {
			if !b.fill(kid+j, e, depth+1, true) {
				return false
			}
		}
	case []string:
		kid := b.block(i, gList, len(x))
		for j, e := range x {
			b.addText(kid+j, e)
		}
	case string:
		b.addText(i, x)
	case bool:
		if x {
			b.addText(i, "True")
		} else {
			b.addText(i, "False")
		}
	case nil:
		b.addText(i, "None")
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		var buf [40]byte
		n, _ := saltdata.AppendNumber(buf[:0], v)
		b.addText(i, string(n))
	default:
		b.addText(i, saltdata.Str(v))
	}
	if elem {
		switch v.(type) {
		case map[string]any, map[any]any, map[string]string, []any, []string:
			b.addText(i, saltdata.Str(v))
		}
	}
	return true
}

func (b *indexer) setKey(i int, k string) {
	b.nodes[i].skey = true
	b.nodes[i].key = b.add(k)
}

// sortKeys sorts keys in the order lookup searches them.
func sortKeys(keys []string) {
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(keyHash(a), keyHash(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// keyHash is 32-bit FNV-1a. Keys that collide are told apart by comparing
// them, so a poor spread costs time, never a wrong answer.
func keyHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// block makes node i a container of n children and returns the index of
// the first, the children being adjacent.
func (b *indexer) block(i int, kind gkind, n int) int {
	kid := len(b.nodes)
	b.nodes = append(b.nodes, make([]gnode, n)...)
	b.nodes[i].kind = kind
	b.nodes[i].kid = uint32(kid)
	b.nodes[i].n = uint32(n)
	return kid
}

func (g *Grains) str(s span) string { return g.text[s.off : s.off+s.len] }

// addrsOf returns the parsed addresses of the ipv4 or ipv6 grain.
func (g *Grains) addrsOf(grain string) []gaddr {
	if grain == "ipv4" {
		return g.addrs[:g.n4]
	}
	return g.addrs[g.n4:]
}

// lookup finds the entry of map node m whose key is k; h is keyHash(k).
func (g *Grains) lookup(m uint32, k string, h uint32) (uint32, bool) {
	n := &g.nodes[m]
	lo, end := n.kid, n.kid+n.nkey
	hi := end
	for lo < hi {
		mid := lo + (hi-lo)/2
		if g.hash[mid] < h {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for ; lo < end && g.hash[lo] == h; lo++ {
		if key := g.nodes[lo].key; int(key.len) == len(k) && g.str(key) == k {
			return lo, true
		}
	}
	return 0, false
}

// The functions below are subdictMatch, dictMatch, traverse and matchValue
// of data.go, step for step, over the nodes instead of the maps.

func (g *Grains) subdictMatch(d uint32, cs []cand, mode dataMode) bool {
	for _, c := range cs {
		v := d
		if c.key != nil {
			var ok bool
			if v, ok = g.traverse(d, c.key); !ok {
				continue
			}
		}
		switch n := &g.nodes[v]; n.kind {
		case gMap:
			if n.n > 0 && g.dictMatch(v, c.m, mode) {
				return true
			}
			continue
		case gList:
			for e := n.kid; e < n.kid+n.n; e++ {
				if g.nodes[e].kind == gMap && g.dictMatch(e, c.m, mode) {
					return true
				}
				if g.matchNode(e, c.m, mode) {
					return true
				}
			}
			continue
		}
		if g.matchNode(v, c.m, mode) {
			return true
		}
	}
	return false
}

func (g *Grains) dictMatch(d uint32, p *pat, mode dataMode) bool {
	q := p
	if p.wild != nil {
		q = p.wild
	}
	if q.raw == "*" {
		return true
	}
	if _, ok := g.lookup(d, q.raw, q.hash); ok {
		return true
	}
	if q.sub != nil && g.subdictMatch(d, q.sub, mode) {
		return true
	}
	if p.wild == nil {
		return false
	}
	n := &g.nodes[d]
	for v := n.kid; v < n.kid+n.n; v++ {
		switch vn := &g.nodes[v]; vn.kind {
		case gMap:
			if g.dictMatch(v, q, mode) {
				return true
			}
		case gList:
			for e := vn.kid; e < vn.kid+vn.n; e++ {
				if g.matchNode(e, q, mode) {
					return true
				}
			}
		default:
			if g.matchNode(v, q, mode) {
				return true
			}
		}
	}
	return false
}

func (g *Grains) traverse(v uint32, key []keyPart) (uint32, bool) {
	for _, k := range key {
		switch n := &g.nodes[v]; n.kind {
		case gMap:
			c, ok := g.lookup(v, k.S, k.hash)
			if !ok && k.IsInt {
				c, ok = g.lookupInt(v, k.Int)
			}
			if !ok {
				return 0, false
			}
			v = c
		case gList:
			found := false
			for e := n.kid; e < n.kid+n.n; e++ {
				if g.nodes[e].kind != gMap {
					continue
				}
				var c uint32
				var ok bool
				if k.IsInt {
					c, ok = g.lookupInt(e, k.Int)
				} else {
					c, ok = g.lookup(e, k.S, k.hash)
				}
				if ok {
					v, found = c, true
					break
				}
			}
			if found {
				continue
			}
			if !k.IsInt {
				return 0, false
			}
			idx := k.Int
			if idx < 0 {
				idx += int(n.n)
			}
			if idx < 0 || idx >= int(n.n) {
				return 0, false
			}
			v = n.kid + uint32(idx)
		default:
			return 0, false
		}
	}
	return v, true
}

// lookupInt finds the entry of map node m whose key is the integer k (a
// map[any]any's keys that are not strings, after its string keys).
func (g *Grains) lookupInt(m uint32, k int) (uint32, bool) {
	n := &g.nodes[m]
	for e := n.kid + n.nkey; e < n.kid+n.n; e++ {
		if key := g.nodes[e].key; key.len > 0 {
			if x, err := strconv.Atoi(g.str(key)); err == nil && x == k {
				return e, true
			}
		}
	}
	return 0, false
}

// matchNode is matchValue: the node's str() against p.
func (g *Grains) matchNode(v uint32, p *pat, mode dataMode) bool {
	n := &g.nodes[v]
	switch mode {
	case modeGlob:
		low := g.str(n.low)
		switch {
		case p.lit:
			return low == p.low
		case p.prefix != "":
			return strings.HasPrefix(low, p.prefix)
		}
		return matchGlob(p.low, low, false)
	case modeRegex:
		return p.re != nil && p.re.MatchString(g.str(n.txt))
	case modeExact:
		return strings.EqualFold(g.str(n.txt), p.raw)
	}
	return false
}

func isInt(k any) bool {
	switch k.(type) {
	case int, int64, uint64: // the types saltdata.Step finds an integer key under
		return true
	}
	return false
}
