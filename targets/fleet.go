package targets

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
)

// Fleet is an inverted index over many minions' grains, for the master,
// which matches each job's target against every minion it knows.
//
// Each minion has a slot, a bit position. For every top-level grain the
// fleet keeps the distinct values the minions hold and, for each, the set of
// slots holding it (a sorted list while it is small, a bitset once it is
// not). A compound target is evaluated as bitset operations: "and"
// narrows the set of slots the next term is tried on, "or" tries the next
// term on the slots not yet matched, "not" is a difference. A grain term
// (G@ P@) whose key names a grain is answered from the index: its pattern
// is matched once against each distinct value of that grain, with the same
// code the per-minion matcher runs, and the slots of the values that match
// are taken, unless fewer minions are left to try than the grain has
// distinct values, in which case those minions are matched one by one.
// The other terms (globs and regular expressions on the id, S@, G@*:…)
// are matched minion by minion, on the slots still in question only.
//
// Results are the per-minion matcher's: the values are compared with the
// same code, and two minions share a value entry only when their values
// are the same Go types holding the same data (see appendEnc). Pillar
// terms match nothing, as for a Minion without pillar: targets that read
// the pillar are matched one minion at a time by the caller.
//
// A Fleet is not safe for concurrent use: Set and Delete need exclusive
// access; Select and Count may run concurrently with each other.
type Fleet struct {
	slot  map[string]uint32
	mins  []fleetMinion // by slot
	free  []uint32      // slots of deleted minions, for reuse
	live  []uint64      // slots in use
	n     int
	keys  map[string]*fleetKey
	nodes int // distinct values over all keys, for reporting
}

type fleetMinion struct {
	id     string
	grains map[string]any
	index  *Grains
	vals   []*fleetVal // the value entries this minion is in
}

// fleetKey is one top-level grain: its distinct values.
type fleetKey struct {
	name  string
	vals  map[string]*fleetVal   // by appendEnc of the value
	lower map[string][]*fleetVal // the string values, by appendLower of the value
	other map[*fleetVal]struct{} // the values that are not strings
}

// fleetVal is one distinct value of a grain and the slots holding it.
type fleetVal struct {
	key   *fleetKey
	enc   string
	v     any    // the value, as one of the minions holding it has it
	low   string // appendLower of a string value
	slots posting
}

// FleetEntry is a minion's grains made ready for Fleet.Set. Building it
// (NewFleetEntry) does the work that needs no access to the fleet, so that
// a caller can do it outside the lock that guards the fleet.
type FleetEntry struct {
	grains map[string]any
	index  *Grains
	vals   []entryVal
}

type entryVal struct {
	key, enc string
	v        any
}

// NewFleetEntry prepares grains, with their Index if the caller has one
// (nil: grain terms that are not answered from the fleet's index walk the
// maps), for Fleet.Set. Nil grains match no grain term.
func NewFleetEntry(grains map[string]any, index *Grains) *FleetEntry {
	e := &FleetEntry{grains: grains, index: index, vals: make([]entryVal, 0, len(grains))}
	var buf []byte
	for k, v := range grains {
		var ok bool
		buf, ok = appendEnc(buf[:0], v, 0)
		enc := string(buf)
		if !ok {
			enc = "" // shared with no other minion (Set gives it a key of its own)
		}
		e.vals = append(e.vals, entryVal{key: k, enc: enc, v: v})
	}
	return e
}

// NewFleet returns an empty fleet.
func NewFleet() *Fleet {
	return &Fleet{slot: map[string]uint32{}, keys: map[string]*fleetKey{}}
}

// Len returns the number of minions in the fleet.
func (f *Fleet) Len() int { return f.n }

// Values returns the number of distinct (grain, value) pairs indexed.
func (f *Fleet) Values() int { return f.nodes }

// Set records (or replaces) the grains of minion id. e must not be used
// again.
func (f *Fleet) Set(id string, e *FleetEntry) {
	s, ok := f.slot[id]
	if ok {
		f.unlink(s)
	} else {
		if n := len(f.free); n > 0 {
			s = f.free[n-1]
			f.free = f.free[:n-1]
		} else {
			s = uint32(len(f.mins))
			f.mins = append(f.mins, fleetMinion{})
		}
		f.slot[id] = s
		setBit(&f.live, s)
		f.n++
	}
	m := &f.mins[s]
	m.id, m.grains, m.index = id, e.grains, e.index
	m.vals = make([]*fleetVal, 0, len(e.vals))
	for _, ev := range e.vals {
		fk := f.keys[ev.key]
		if fk == nil {
			fk = &fleetKey{name: ev.key, vals: map[string]*fleetVal{},
				lower: map[string][]*fleetVal{}, other: map[*fleetVal]struct{}{}}
			f.keys[ev.key] = fk
		}
		enc := ev.enc
		if enc == "" {
			// Not encodable: a value entry of this slot's own. Encodings
			// of ordinary values never start with 'u'.
			enc = "u" + strconv.FormatUint(uint64(s), 10)
		}
		fv := fk.vals[enc]
		if fv == nil {
			fv = &fleetVal{key: fk, enc: enc, v: ev.v}
			fk.vals[enc] = fv
			if str, ok := ev.v.(string); ok {
				fv.low = string(appendLower(nil, str))
				fk.lower[fv.low] = append(fk.lower[fv.low], fv)
			} else {
				fk.other[fv] = struct{}{}
			}
			f.nodes++
		}
		fv.slots.add(s)
		m.vals = append(m.vals, fv)
	}
	e.vals = nil
}

// Delete removes minion id, if present.
func (f *Fleet) Delete(id string) {
	s, ok := f.slot[id]
	if !ok {
		return
	}
	f.unlink(s)
	delete(f.slot, id)
	f.mins[s] = fleetMinion{}
	clearBit(f.live, s)
	f.free = append(f.free, s)
	f.n--
}

// unlink takes slot s out of its value entries.
func (f *Fleet) unlink(s uint32) {
	for _, fv := range f.mins[s].vals {
		fv.slots.remove(s)
		if fv.slots.n == 0 {
			k := fv.key
			delete(k.vals, fv.enc)
			if _, ok := fv.v.(string); ok {
				l := slices.DeleteFunc(k.lower[fv.low], func(x *fleetVal) bool { return x == fv })
				if len(l) == 0 {
					delete(k.lower, fv.low)
				} else {
					k.lower[fv.low] = l
				}
			} else {
				delete(k.other, fv)
			}
			f.nodes--
			if len(fv.key.vals) == 0 {
				delete(f.keys, fv.key.name)
			}
		}
	}
	f.mins[s].vals = nil
}

// Select returns, sorted, the ids among candidates that m matches: those
// in the fleet as their grains decide, the others as minions without
// grains. Candidates are distinct ids.
func (f *Fleet) Select(m *Matcher, candidates []string) []string {
	mask := make([]uint64, len(f.live))
	out := []string{}
	mn := Minion{}
	for _, id := range candidates {
		if s, ok := f.slot[id]; ok {
			mask[s>>6] |= 1 << (s & 63)
			continue
		}
		mn.ID = id
		if m.Match(&mn) {
			out = append(out, id)
		}
	}
	got := f.eval(m, mask)
	out = slices.Grow(out, popcount(got))
	forEach(got, func(s uint32) { out = append(out, f.mins[s].id) })
	slices.Sort(out)
	return out
}

// Count returns how many minions of the fleet m matches.
func (f *Fleet) Count(m *Matcher) int {
	return popcount(f.eval(m, slices.Clone(f.live)))
}

// eval returns the slots of mask that m matches; it may reuse mask.
func (f *Fleet) eval(m *Matcher, mask []uint64) []uint64 {
	e := &fleetEval{f: f, nw: len(mask), univ: mask}
	out := make([]uint64, len(mask))
	e.eval(m.root, mask, out)
	return out
}

type fleetEval struct {
	f    *Fleet
	nw   int
	univ []uint64
	memo map[*groupNode][]uint64
	free [][]uint64
	mn   Minion
}

func (e *fleetEval) get() []uint64 {
	if n := len(e.free); n > 0 {
		b := e.free[n-1]
		e.free = e.free[:n-1]
		return b
	}
	return make([]uint64, e.nw)
}

func (e *fleetEval) put(b []uint64) { e.free = append(e.free, b) }

// eval sets out to the slots of mask that n matches. out does not alias
// mask.
func (e *fleetEval) eval(n node, mask, out []uint64) {
	switch n := n.(type) {
	case *andNode:
		copy(out, mask)
		tmp := e.get()
		for _, k := range n.kids {
			if isEmpty(out) {
				break
			}
			e.eval(k, out, tmp)
			copy(out, tmp)
		}
		e.put(tmp)
	case *orNode:
		clear(out)
		rem, tmp := e.get(), e.get()
		copy(rem, mask)
		for _, k := range n.kids {
			if isEmpty(rem) {
				break
			}
			e.eval(k, rem, tmp)
			for i := range out {
				out[i] |= tmp[i]
				rem[i] &^= tmp[i]
			}
		}
		e.put(rem)
		e.put(tmp)
	case *notNode:
		e.eval(n.kid, mask, out)
		for i := range out {
			out[i] = mask[i] &^ out[i]
		}
	case *groupNode:
		// A nodegroup may be referenced many times: it is evaluated once,
		// over every candidate.
		g, ok := e.memo[n]
		if !ok {
			g = make([]uint64, e.nw)
			e.eval(n.kid, e.univ, g)
			if e.memo == nil {
				e.memo = map[*groupNode][]uint64{}
			}
			e.memo[n] = g
		}
		for i := range out {
			out[i] = mask[i] & g[i]
		}
	case *dataNode:
		e.data(n, mask, out)
	case *listNode:
		if len(n.ids) < popcount(mask) {
			clear(out)
			for _, id := range n.ids {
				if s, ok := e.f.slot[id]; ok && hasBit(mask, s) {
					setBit(&out, s)
				}
			}
			return
		}
		e.scan(n, mask, out)
	case *globNode:
		if n.lit {
			clear(out)
			if s, ok := e.f.slot[n.pat]; ok && hasBit(mask, s) {
				setBit(&out, s)
			}
			return
		}
		e.scan(n, mask, out)
	default:
		e.scan(n, mask, out)
	}
}

// scan matches n against each minion of mask.
func (e *fleetEval) scan(n node, mask, out []uint64) {
	clear(out)
	for i, w := range mask {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			w &= w - 1
			s := uint32(i<<6 | b)
			m := &e.f.mins[s]
			e.mn.ID, e.mn.Grains, e.mn.Index = m.id, m.grains, m.index
			if n.match(&e.mn) {
				out[i] |= 1 << b
			}
		}
	}
}

// data evaluates a grain or pillar term.
func (e *fleetEval) data(n *dataNode, mask, out []uint64) {
	if n.pillar {
		clear(out) // the fleet holds no pillar
		return
	}
	work := 0
	for _, c := range n.top {
		if c.key == nil {
			e.scan(n, mask, out) // "*:…": the whole grains
			return
		}
		if k := e.f.keys[c.key[0].S]; k != nil {
			if lookup(n, c) {
				work += 1 + len(k.other)
			} else {
				work += len(k.vals)
			}
		}
	}
	if work > popcount(mask) {
		e.scan(n, mask, out)
		return
	}
	clear(out)
	for _, c := range n.top {
		k := e.f.keys[c.key[0].S]
		if k == nil {
			continue
		}
		if !lookup(n, c) {
			for _, fv := range k.vals {
				if v, ok := traverse(fv.v, c.key[1:]); ok && foundMatch(v, c.m, n.mode) {
					fv.slots.orInto(out)
				}
			}
			continue
		}
		// A string matches a pattern without metacharacters when it
		// lowers to it (foldEqual): look it up. Other values (numbers,
		// lists, maps) are matched one distinct value at a time.
		for _, fv := range k.lower[c.m.low] {
			if foundMatch(fv.v, c.m, n.mode) {
				fv.slots.orInto(out)
			}
		}
		for fv := range k.other {
			if foundMatch(fv.v, c.m, n.mode) {
				fv.slots.orInto(out)
			}
		}
	}
	for i := range out {
		out[i] &= mask[i]
	}
}

// lookup reports whether candidate c of n is a top-level grain compared
// with a pattern without glob metacharacters, which the string values
// answer by lookup.
func lookup(n *dataNode, c cand) bool {
	return len(c.key) == 1 && n.mode == modeGlob && c.m.lit && c.m.wild == nil
}

// posting is a set of slots: a sorted list while small, then a bitset.
type posting struct {
	list  []uint32
	dense []uint64
	n     int
}

// denseAt is the size at which a posting becomes a bitset: from there a
// bitset of the slots it spans is no larger than the list.
func (p *posting) denseAt(s uint32) bool {
	return p.n >= 64 && p.n*32 >= int(s)
}

func (p *posting) add(s uint32) {
	if p.dense != nil {
		if hasBit(p.dense, s) {
			return
		}
		if int(s>>6) < len(p.dense) || p.denseAt(s) {
			setBit(&p.dense, s)
			p.n++
			return
		}
		// The bitset would grow to a slot far beyond what its members
		// justify (a value whose minions took the first slots): back to a
		// list, so that memory stays in proportion to the members.
		p.list = make([]uint32, 0, p.n+1)
		forEach(p.dense, func(x uint32) { p.list = append(p.list, x) })
		p.dense = nil
	}
	i, found := slices.BinarySearch(p.list, s)
	if found {
		return
	}
	p.list = slices.Insert(p.list, i, s)
	p.n++
	if last := p.list[len(p.list)-1]; p.denseAt(last) {
		for _, x := range p.list {
			setBit(&p.dense, x)
		}
		p.list = nil
	}
}

func (p *posting) remove(s uint32) {
	if p.dense != nil {
		if hasBit(p.dense, s) {
			clearBit(p.dense, s)
			p.n--
		}
		return
	}
	if i, found := slices.BinarySearch(p.list, s); found {
		p.list = slices.Delete(p.list, i, i+1)
		p.n--
	}
}

// orInto sets the posting's slots in out, which is long enough for every
// slot of the fleet.
func (p *posting) orInto(out []uint64) {
	if p.dense != nil {
		d := p.dense[:min(len(p.dense), len(out))]
		for i, w := range d {
			out[i] |= w
		}
		return
	}
	for _, s := range p.list {
		out[s>>6] |= 1 << (s & 63)
	}
}

// bitset returns the posting's slots as a bitset.
func (p *posting) bitset() []uint64 {
	if p.dense != nil {
		return p.dense
	}
	var b []uint64
	for _, s := range p.list {
		setBit(&b, s)
	}
	return b
}

func setBit(b *[]uint64, s uint32) {
	i := int(s >> 6)
	if i >= len(*b) {
		*b = slices.Grow(*b, i+1-len(*b))[:i+1]
	}
	(*b)[i] |= 1 << (s & 63)
}

func clearBit(b []uint64, s uint32) {
	if i := int(s >> 6); i < len(b) {
		b[i] &^= 1 << (s & 63)
	}
}

func hasBit(b []uint64, s uint32) bool {
	i := int(s >> 6)
	return i < len(b) && b[i]&(1<<(s&63)) != 0
}

func popcount(b []uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}

func isEmpty(b []uint64) bool {
	for _, w := range b {
		if w != 0 {
			return false
		}
	}
	return true
}

func forEach(b []uint64, f func(s uint32)) {
	for i, w := range b {
		for w != 0 {
			f(uint32(i<<6 | bits.TrailingZeros64(w)))
			w &= w - 1
		}
	}
}

// appendEnc appends an encoding of v that tells apart any two values the
// matcher could tell apart: the Go type of every part is written with its
// contents, a map's entries sorted by encoded key. It reports false for a
// type it does not know, or nesting deeper than maxIndexDepth.
func appendEnc(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxIndexDepth {
		return b, false
	}
	num := func(tag byte, u uint64) []byte {
		b = append(b, tag)
		return binary.AppendUvarint(b, u)
	}
	str := func(tag byte, s string) []byte {
		b = num(tag, uint64(len(s)))
		return append(b, s...)
	}
	switch x := v.(type) {
	case string:
		return str('s', x), true
	case nil:
		return append(b, 'n'), true
	case bool:
		if x {
			return append(b, 't'), true
		}
		return append(b, 'f'), true
	case int:
		return num('i', uint64(x)), true
	case int8:
		return num('1', uint64(x)), true
	case int16:
		return num('2', uint64(x)), true
	case int32:
		return num('4', uint64(x)), true
	case int64:
		return num('8', uint64(x)), true
	case uint:
		return num('I', uint64(x)), true
	case uint8:
		return num('!', uint64(x)), true
	case uint16:
		return num('@', uint64(x)), true
	case uint32:
		return num('$', uint64(x)), true
	case uint64:
		return num('*', x), true
	case float32:
		return num('F', uint64(math.Float32bits(x))), true
	case float64:
		return num('D', math.Float64bits(x)), true
	case []string:
		b = num('S', uint64(len(x)))
		for _, s := range x {
			b = str('s', s)
		}
		return b, true
	case []any:
		b = num('l', uint64(len(x)))
		for _, e := range x {
			var ok bool
			if b, ok = appendEnc(b, e, depth+1); !ok {
				return b, false
			}
		}
		return b, true
	case map[string]string:
		b = num('M', uint64(len(x)))
		for _, k := range sortedKeys(x) {
			b = str('s', k)
			b = str('s', x[k])
		}
		return b, true
	case map[string]any:
		b = num('m', uint64(len(x)))
		for _, k := range sortedKeys(x) {
			b = str('s', k)
			var ok bool
			if b, ok = appendEnc(b, x[k], depth+1); !ok {
				return b, false
			}
		}
		return b, true
	case map[any]any:
		type kv struct {
			k string
			v any
		}
		kvs := make([]kv, 0, len(x))
		for k, v := range x {
			switch k.(type) {
			case map[string]any, map[any]any, map[string]string, []any, []string:
				return b, false
			}
			kb, ok := appendEnc(nil, k, depth+1)
			if !ok {
				return b, false
			}
			kvs = append(kvs, kv{string(kb), v})
		}
		slices.SortFunc(kvs, func(a, c kv) int {
			switch {
			case a.k < c.k:
				return -1
			case a.k > c.k:
				return 1
			}
			return 0
		})
		b = num('a', uint64(len(x)))
		for _, e := range kvs {
			b = append(b, e.k...)
			var ok bool
			if b, ok = appendEnc(b, e.v, depth+1); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
