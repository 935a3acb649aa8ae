package targets

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// plainSelect is what the master did before the fleet index: each
// candidate matched on its own (registry.match), the matches sorted.
func plainSelect(m *Matcher, byID map[string]*Minion, candidates []string) []string {
	var out []string
	for _, id := range candidates {
		mn := byID[id]
		if mn == nil {
			mn = &Minion{ID: id}
		}
		if m.Match(&Minion{ID: id, Grains: mn.Grains, Index: mn.Index}) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TestFleetDocExamples runs the Salt documentation table (the targets
// that read no pillar) through the fleet index, with one candidate the
// fleet does not hold, and wants the table's minions.
func TestFleetDocExamples(t *testing.T) {
	ms := fleet()
	f := NewFleet()
	byID := map[string]*Minion{}
	var cands []string
	for i, mn := range ms {
		if i%2 == 0 {
			mn.Index = Index(mn.Grains) // some with their index, some without
		}
		cands = append(cands, mn.ID)
		if mn.ID == "ms-3" {
			continue // a candidate outside the fleet (an accepted key never seen)
		}
		byID[mn.ID] = mn
		f.Set(mn.ID, NewFleetEntry(mn.Grains, mn.Index))
	}
	n := 0
	for _, tt := range saltDocExamples {
		m, err := Compile(tt.expr, tt.tgtType, Options{Delimiter: tt.delim, Nodegroups: docNodegroups})
		if err != nil {
			t.Fatalf("Compile(%q, %q): %v", tt.expr, tt.tgtType, err)
		}
		if m.NeedsPillar() {
			continue
		}
		n++
		var want []string
		for _, id := range ids(tt.want) {
			if id != "ms-3" || !m.NeedsGrains() {
				want = append(want, id)
			}
		}
		got := f.Select(m, cands)
		if plain := plainSelect(m, byID, cands); !slices.Equal(got, plain) {
			t.Errorf("Compile(%q, %q): fleet %v, per minion %v", tt.expr, tt.tgtType, got, plain)
		}
		if !m.NeedsGrains() && !slices.Equal(got, want) {
			t.Errorf("Compile(%q, %q): fleet %v, want %v", tt.expr, tt.tgtType, got, want)
		}
	}
	if n < 40 {
		t.Errorf("only %d examples without pillar", n)
	}
}

var (
	fleetIDs   = []string{"web", "db", "cam", "Web", "m", "site001", "site002-x", "ä", "x.y"}
	fleetGlobs = []string{"*", "web*", "W*", "*1", "site00[12]*", "?b*", "m", "db3", "[!w]*", "*.*", "ä*"}
	fleetRes   = []string{"web", "d", "site00[0-1]", `.*\d$`, "(?i)web", "cam|db", "x\\.y", "ä"}
	fleetOS    = []string{"Debian", "debian", "Ubuntu", "OpenWrt"}
)

// genFleetGrains is genGrains plus grains many minions share (os, model,
// a nested firmware map), so that value entries hold many slots and turn
// into bitsets.
func genFleetGrains(r *rand.Rand) map[string]any {
	if r.IntN(20) == 0 {
		return nil
	}
	g := genGrains(r)
	switch r.IntN(5) {
	case 0:
	case 1, 2:
		g["os"] = "Debian" // most minions: a value entry that turns into a bitset
	default:
		g["os"] = fleetOS[r.IntN(len(fleetOS))]
	}
	if r.IntN(3) > 0 {
		g["model"] = []string{"cam-x100", "cam-x200", "gw"}[r.IntN(3)]
	}
	if r.IntN(2) == 0 {
		g["firmware"] = map[string]any{"version": fmt.Sprintf("1.%d", r.IntN(3)), "channel": []any{"stable", "beta"}[r.IntN(2)]}
	}
	if r.IntN(4) == 0 {
		g["num"] = []any{1, int64(1), "1", 1.0, uint64(1), true}[r.IntN(6)] // same str(), other types
	}
	return g
}

// genFleetTerm adds id terms (glob, E@, L@, N@) to genTerm's grain terms.
func genFleetTerm(r *rand.Rand) string {
	switch r.IntN(14) {
	case 0:
		return fleetGlobs[r.IntN(len(fleetGlobs))]
	case 1:
		return "E@" + fleetRes[r.IntN(len(fleetRes))]
	case 2:
		l := make([]string, 1+r.IntN(12))
		for i := range l {
			l[i] = fleetIDs[r.IntN(len(fleetIDs))] + fmt.Sprint(r.IntN(40))
		}
		return "L@" + strings.Join(l, ",")
	case 3:
		return "N@" + []string{"g1", "g2", "g3"}[r.IntN(3)]
	case 4:
		return "G@os:" + []string{"debian", "Deb*", "ubuntu", "*wrt"}[r.IntN(4)]
	case 5:
		return "G@firmware:version:" + []string{"1.0", "1.*", "1.[12]"}[r.IntN(3)]
	case 6:
		return "G@model:" + []string{"cam-x100", "cam*", "gw", "*"}[r.IntN(4)]
	case 7:
		return "G@num:" + []string{"1", "1.0", "True", "*"}[r.IntN(4)]
	}
	return genTerm(r)
}

// genFleetExpr returns a compound expression of up to depth levels of
// parentheses.
func genFleetExpr(r *rand.Rand, depth int) string {
	var b strings.Builder
	for i := range 1 + r.IntN(4) {
		if i > 0 {
			b.WriteString([]string{" and ", " or ", " and not ", " or not ", " not "}[r.IntN(5)])
		} else if r.IntN(4) == 0 {
			b.WriteString("not ")
		}
		if depth > 0 && r.IntN(3) == 0 {
			b.WriteString("( " + genFleetExpr(r, depth-1) + " )")
		} else {
			b.WriteString(genFleetTerm(r))
		}
	}
	return b.String()
}

var fleetGroups = map[string]any{
	"g1": "G@os:debian or web*",
	"g2": "N@g1 and not G@model:gw",
	"g3": []any{"(", "N@g2", ")", "or", "E@db"},
}

// TestFleetAgreesRandom is the differential test of the fleet index: on
// random fleets changed between rounds (grains replaced, minions added and
// deleted), random compound targets select the same minions through the
// fleet as through the per-minion matcher.
func TestFleetAgreesRandom(t *testing.T) {
	seeds, rounds, exprs := 6, 12, 60
	if testing.Short() || raceEnabled {
		seeds, rounds = 2, 4
	}
	total, matched, cases := 0, 0, 0
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 20))
		f := NewFleet()
		byID := map[string]*Minion{}
		set := func(id string) {
			g := genFleetGrains(r)
			mn := &Minion{ID: id, Grains: g}
			if r.IntN(3) > 0 {
				mn.Index = Index(g)
			}
			byID[id] = mn
			f.Set(id, NewFleetEntry(mn.Grains, mn.Index))
		}
		newID := func() string {
			return fleetIDs[r.IntN(len(fleetIDs))] + fmt.Sprint(r.IntN(80))
		}
		for range 250 + r.IntN(250) {
			set(newID())
		}
		for round := range rounds {
			// Change the fleet: new grains, new minions, deletions.
			for range 1 + r.IntN(80) {
				switch id := newID(); r.IntN(3) {
				case 0:
					if _, ok := byID[id]; ok {
						f.Delete(id)
						delete(byID, id)
					}
				default:
					set(id)
				}
			}
			checkFleetConsistent(t, f, byID)
			var cands []string
			for id := range byID {
				if r.IntN(8) > 0 {
					cands = append(cands, id)
				}
			}
			for range 5 {
				if id := newID(); byID[id] == nil {
					cands = append(cands, id) // not in the fleet: matched without grains
				}
			}
			cands = slices.Compact(slices.Sorted(slices.Values(cands)))
			for range exprs {
				expr := genFleetExpr(r, 3)
				m, err := Compile(expr, "compound", Options{Nodegroups: fleetGroups})
				if err != nil {
					continue // a random regular expression may not compile
				}
				got, want := f.Select(m, cands), plainSelect(m, byID, cands)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d round %d: %q: fleet %v, per minion %v", seed, round, expr, got, want)
				}
				cases++
				total += len(cands)
				matched += len(want)
			}
		}
	}
	// Targets must select some minions and leave others, or agreement
	// would say little.
	if matched < total/20 || matched > total-total/20 {
		t.Errorf("%d of %d minions selected, want between 5%% and 95%%", matched, total)
	}
	t.Logf("%d targets, %d of %d minion matches", cases, matched, total)
}

// checkFleetConsistent compares f with a fleet built afresh from byID:
// what Set and Delete maintained is what building gives.
func checkFleetConsistent(t *testing.T, f *Fleet, byID map[string]*Minion) {
	t.Helper()
	g := NewFleet()
	for id, mn := range byID {
		g.Set(id, NewFleetEntry(mn.Grains, mn.Index))
	}
	if f.Len() != len(byID) || f.Values() != g.Values() || len(f.keys) != len(g.keys) {
		t.Fatalf("fleet after changes: %d minions, %d values, %d keys; built afresh: %d, %d, %d",
			f.Len(), f.Values(), len(f.keys), g.Len(), g.Values(), len(g.keys))
	}
	for name, k := range f.keys {
		for enc, v := range k.vals {
			if v.slots.n == 0 {
				t.Fatalf("grain %s: an empty value entry was kept", name)
			}
			if strings.HasPrefix(enc, "u") {
				continue
			}
			var ids []string
			forEach(v.slots.bitset(), func(s uint32) { ids = append(ids, f.mins[s].id) })
			var want []string
			w := g.keys[name].vals[enc]
			forEach(w.slots.bitset(), func(s uint32) { want = append(want, g.mins[s].id) })
			slices.Sort(ids)
			slices.Sort(want)
			if !slices.Equal(ids, want) || len(ids) != v.slots.n {
				t.Fatalf("grain %s value %q: minions %v (n %d), built afresh %v", name, enc, ids, v.slots.n, want)
			}
		}
	}
}

// TestFleetPostingBecomesBitset: a value most minions share is held as a
// bitset, and stays right as minions leave.
func TestFleetPostingBecomesBitset(t *testing.T) {
	f := NewFleet()
	for i := range 1000 {
		f.Set(fmt.Sprintf("m%04d", i), NewFleetEntry(map[string]any{"os": []string{"Debian", "Arch"}[i%2]}, nil))
	}
	v := f.keys["os"].vals[string(mustEnc(t, "Debian"))]
	if v.slots.dense == nil || v.slots.n != 500 {
		t.Fatalf("os Debian: dense %v, n %d; want a bitset of 500", v.slots.dense != nil, v.slots.n)
	}
	for i := 0; i < 1000; i += 4 {
		f.Delete(fmt.Sprintf("m%04d", i))
	}
	m, err := Compile("G@os:debian", "compound", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Count(m); got != 250 {
		t.Errorf("G@os:debian after deleting every fourth minion: %d, want 250", got)
	}
}

func mustEnc(t *testing.T, v any) []byte {
	b, ok := appendEnc(nil, v, 0)
	if !ok {
		t.Fatalf("appendEnc(%#v) failed", v)
	}
	return b
}

// TestFleetEncodingTellsTypesApart: values that print alike but are of
// other types, or maps that differ only by a key's type, are not shared.
func TestFleetEncodingTellsTypesApart(t *testing.T) {
	vals := []any{1, int64(1), uint64(1), int8(1), "1", 1.0, float32(1), true, "True", nil, "None",
		[]any{"a"}, []string{"a"}, map[string]any{"a": "b"}, map[string]string{"a": "b"},
		map[any]any{"a": "b"}, map[any]any{1: "b"}, map[any]any{"1": "b"}, map[any]any{int64(1): "b"},
		[]any{"a", "b"}, []any{"ab"}, []any{[]any{"a"}, "b"}, []any{[]any{"a", "b"}}}
	seen := map[string]any{}
	for _, v := range vals {
		enc := string(mustEnc(t, v))
		if w, ok := seen[enc]; ok {
			t.Errorf("%#v and %#v share the encoding %q", v, w, enc)
		}
		seen[enc] = v
	}
	a := mustEnc(t, map[string]any{"x": 1, "y": []any{"a"}})
	b := mustEnc(t, map[string]any{"y": []any{"a"}, "x": 1})
	if string(a) != string(b) {
		t.Errorf("equal maps encode differently: %q, %q", a, b)
	}
	if _, ok := appendEnc(nil, struct{}{}, 0); ok {
		t.Errorf("an unknown type was encoded")
	}
}

// TestFleetHostile: a target of thousands of terms, or nested as deep as
// Compile allows, or a nodegroup referenced thousands of times, costs
// bounded time over a fleet of 20,000 minions, and selects what the
// per-minion matcher selects (on 500 of them, 100 under -race).
func TestFleetHostile(t *testing.T) {
	n := 20_000
	if testing.Short() || raceEnabled {
		n = 4000
	}
	ms := benchFleet(n)
	f := NewFleet()
	byID := map[string]*Minion{}
	var cands []string
	for _, mn := range ms {
		mn.Index = Index(mn.Grains)
		f.Set(mn.ID, NewFleetEntry(mn.Grains, mn.Index))
		byID[mn.ID] = mn
		cands = append(cands, mn.ID)
	}
	var wide, serials []string
	for i := 0; len(strings.Join(wide, " or "))+40 < MaxExprLen; i++ {
		wide = append(wide, fmt.Sprintf("G@site:site%03d", (2*i+1)%1000)) // many terms on a grain of 500 values
	}
	for i := 0; len(strings.Join(serials, " and not "))+40 < MaxExprLen; i++ {
		serials = append(serials, fmt.Sprintf("G@serialnumber:SN%08d", 13*i)) // on a grain of n values
	}
	deep := strings.Repeat("( not ", MaxDepth/2-1) + "G@os:debian" + strings.Repeat(" )", MaxDepth/2-1)
	groups := map[string]any{"g0": "G@model:cam-x* and not E@site00[0-4]-"}
	for i := 1; i <= 15; i++ {
		groups[fmt.Sprint("g", i)] = fmt.Sprintf("N@g%d or N@g%d", i-1, i-1) // 2^15 references of g0
	}
	tests := []struct{ name, expr string }{
		{fmt.Sprintf("%d site terms", len(wide)), strings.Join(wide, " or ")},
		{fmt.Sprintf("%d serial terms", len(serials)), strings.Join(serials, " or ")},
		{fmt.Sprintf("%d and-not serial terms", len(serials)), "* and not " + strings.Join(serials, " and not ")},
		{"deep", deep},
		{"nodegroup 2^15 times", "N@g15"},
	}
	for _, tt := range tests {
		m, err := Compile(tt.expr, "compound", Options{Nodegroups: groups})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		start := time.Now()
		got := f.Select(m, cands)
		took := time.Since(start)
		// The per-minion matcher is slow on these: compare on a sample.
		some := cands[:500]
		if raceEnabled || testing.Short() {
			some = cands[:100]
		}
		if got, want := f.Select(m, some), plainSelect(m, byID, some); !slices.Equal(got, want) {
			t.Errorf("%s: of a sample, fleet selects %d minions, per minion %d", tt.name, len(got), len(want))
		}
		t.Logf("%s: %d selected in %v", tt.name, len(got), took)
		// Generous: the point is no blow-up, on a shared machine.
		if took > 20*time.Second {
			t.Errorf("%s took %v", tt.name, took)
		}
	}
}

// TestFleetPostingStaysSmall: a value held by the first minions becomes a
// bitset; when a minion far beyond them joins it, the value goes back to a
// list instead of a bitset spanning every slot.
func TestFleetPostingStaysSmall(t *testing.T) {
	f := NewFleet()
	for i := range 100_000 {
		os := "Arch"
		if i < 100 || i == 99_999 {
			os = "Debian"
		}
		f.Set(fmt.Sprintf("m%06d", i), NewFleetEntry(map[string]any{"os": os}, nil))
	}
	v := f.keys["os"].vals[string(mustEnc(t, "Debian"))]
	if v.slots.dense != nil || v.slots.n != 101 {
		t.Errorf("os Debian: a bitset of %d words for %d minions, want a list of 101", len(v.slots.dense), v.slots.n)
	}
	a := f.keys["os"].vals[string(mustEnc(t, "Arch"))]
	if a.slots.dense == nil || a.slots.n != 100_000-101 {
		t.Errorf("os Arch: dense %v, n %d", a.slots.dense != nil, a.slots.n)
	}
	m, err := Compile("G@os:debian or G@os:ARCH", "compound", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Count(m); got != 100_000 {
		t.Errorf("count %d, want 100000", got)
	}
}
