package targets

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// indexed returns ms with each minion's Index built, as the master holds them.
func indexed(ms []*Minion) []*Minion {
	out := make([]*Minion, len(ms))
	for i, mn := range ms {
		c := *mn
		c.Index = Index(mn.Grains)
		out[i] = &c
	}
	return out
}

// TestIndexDocExamples runs the whole Salt documentation table against the
// fleet twice, walking the grain maps and reading the index, and wants the
// same minions both ways, and the table's.
func TestIndexDocExamples(t *testing.T) {
	plain, idx := fleet(), indexed(fleet())
	for i, mn := range idx {
		if got, want := mn.Index == nil, plain[i].Grains == nil; got != want {
			t.Fatalf("Index(grains of %s) == nil is %v, want %v", mn.ID, got, want)
		}
	}
	for _, tt := range saltDocExamples {
		m, err := Compile(tt.expr, tt.tgtType, Options{Delimiter: tt.delim, Nodegroups: docNodegroups})
		if err != nil {
			t.Errorf("Compile(%q, %q): %v", tt.expr, tt.tgtType, err)
			continue
		}
		var got []string
		for i, mn := range idx {
			a, b := m.Match(plain[i]), m.Match(mn)
			if a != b {
				t.Errorf("Compile(%q, %q) on %s: maps %v, index %v", tt.expr, tt.tgtType, mn.ID, a, b)
			}
			if b {
				got = append(got, mn.ID)
			}
		}
		slices.Sort(got)
		if want := ids(tt.want); !slices.Equal(got, want) {
			t.Errorf("Compile(%q, %q) with the index matched %v, want %v", tt.expr, tt.tgtType, got, want)
		}
	}
}

// TestIndexValueFormats runs TestGrainValueFormats' table (numbers, None,
// lists of maps, map[any]any, case folding) against the index.
func TestIndexValueFormats(t *testing.T) {
	g := valueFormatGrains()
	mn := &Minion{ID: "x", Grains: g, Index: Index(g)}
	for _, tt := range grainValueFormats {
		m, err := Compile(tt.expr, tt.tgtType, Options{})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		if got := m.Match(mn); got != tt.want {
			t.Errorf("Compile(%q, %q).Match with the index = %v, want %v", tt.expr, tt.tgtType, got, tt.want)
		}
	}
}

// TestIndexPreferred checks that the matcher reads the index when it is
// set: an index built from other grains decides.
func TestIndexPreferred(t *testing.T) {
	mn := &Minion{ID: "x", Grains: map[string]any{"os": "Debian", "ipv4": []any{"10.0.0.1"}},
		Index: Index(map[string]any{"os": "Arch", "ipv4": []string{"192.168.0.1"}})}
	tests := []struct {
		expr string
		want bool
	}{
		{"G@os:arch", true},
		{"G@os:debian", false},
		{"S@192.168.0.0/16", true},
		{"S@10.0.0.1", false},
		{"x and not G@os:Debian", true},
	}
	for _, tt := range tests {
		m, err := Compile(tt.expr, "compound", Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Match(mn); got != tt.want {
			t.Errorf("Compile(%q).Match = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

func TestIndexNilAndDeep(t *testing.T) {
	if g := Index(nil); g != nil {
		t.Errorf("Index(nil) = %v, want nil", g)
	}
	empty := Index(map[string]any{})
	if empty == nil {
		t.Fatal("Index(empty map) = nil, want an index")
	}
	m, err := Compile("G@*:* or G@*:x", "compound", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Match(&Minion{ID: "x", Grains: map[string]any{}, Index: empty}) != m.Match(&Minion{ID: "x", Grains: map[string]any{}}) {
		t.Errorf("empty grains: index and maps disagree")
	}
	// Grains nested deeper than maxIndexDepth are left to the map walk.
	var deep any = "bottom"
	for range maxIndexDepth + 1 {
		deep = map[string]any{"a": deep}
	}
	g := deep.(map[string]any)
	if idx := Index(g); idx != nil {
		t.Errorf("Index(%d levels) = %p, want nil", maxIndexDepth+1, idx)
	}
	shallow := map[string]any{"a": map[string]any{"a": "bottom"}}
	if Index(shallow) == nil {
		t.Errorf("Index(2 levels) = nil, want an index")
	}
}

func TestIndexMatchAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race, so regexp matching allocates")
	}
	exprs := []string{
		"G@os:Debian and G@roles:web and not E@db.* or L@a,b,ms-1 and S@192.168.0.0/16",
		"G@num_cpus:4 or G@virtual:false or G@mem_gib:7.*",
		"G@ec2_tags:environment:prod* or G@*:staging or I@foo:bar:baz*",
		"webserv? or web*.loc or P@os:deb.* or S@2001:db8::/64",
		`P@num_cpus:\d or P@virtual:f.* or G@roles:x:y or G@roles:-1:cache`, // regexes on numbers, keys through lists
		"N@group3 or N@hosts",
	}
	minions := indexed(fleet())
	for _, e := range exprs {
		m, err := Compile(e, "compound", Options{Nodegroups: docNodegroups})
		if err != nil {
			t.Fatalf("Compile(%q): %v", e, err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			for _, mn := range minions {
				m.Match(mn)
			}
		})
		if allocs != 0 {
			t.Errorf("Match(%q) with the index allocates %v times per fleet, want 0", e, allocs)
		}
	}
}

// The generators below make random grains and targets from small
// vocabularies, so that keys, values and patterns meet often.

var (
	genKeys = []string{"os", "Os", "roles", "a", "b", "ipv4", "ipv6", "x:y", "0", "1", "-1", "*", "Ä", "ä", ""}
	genStrs = []string{"Debian", "debian", "DEBIAN", "web", "WEB", "ÄRGER", "ärger", "a:b", "x:y:z", "10.0.0.1",
		"10.1.2.3", "192.168.1.1", "::1", "fe80::1%eth0", "2001:db8::1", "\xff\xfeX", "1.5", "True", "none", "",
		"*", "[x", "İstanbul", "ſ", "KELVIN\u212a", "1", "-1", "a b"}
	genPats = []string{"*", "deb*", "DEBIAN", "web", "w?b", "[a-z]*", "[!a-z]*", "1", "-1", "true", "false",
		"none", "ä*", "ÄRGER", "a:b", "*:*", "*:web", "x:y:z", "1.5", "3.0", "[x", "*ian", "10.*", "İ*", "i*",
		"\xff*", "ſ", "s", "{*", "[*", "*'web'*", "k*"}
	genRes = []string{".*", "deb", "D", "(?-i)D", `\d`, `\d+\.\d`, "[[:upper:]]", `\p{Lu}`, "true|none", "ä", "Ä",
		"i", "İ", "s", `\{`, `\[`, "(web|x)$", "10\\."}
	genNets = []string{"10.0.0.0/8", "10.0.0.1", "::1", "fe80::1%eth0", "fe80::/10", "0.0.0.0/0", "::/0",
		"192.168.0.0/16", "2001:db8::/32"}
)

func genValue(r *rand.Rand, depth int) any {
	n := 9
	if depth >= 3 {
		n = 5 // scalars only
	}
	switch r.IntN(n) {
	case 0, 1:
		return genStrs[r.IntN(len(genStrs))]
	case 2:
		switch r.IntN(6) {
		case 0:
			return r.IntN(5) - 2
		case 1:
			return int8(r.IntN(5) - 2)
		case 2:
			return uint64(r.IntN(3))
		case 3:
			return []float64{1.5, 3.0, 1e16, 0.00001, -0.0}[r.IntN(5)]
		case 4:
			return float32(1.5)
		default:
			return int64(-1)
		}
	case 3:
		return r.IntN(2) == 0
	case 4:
		if r.IntN(3) == 0 {
			return map[string]string{"k": "V"} // neither traversed nor a scalar: matched as str()
		}
		return nil
	case 5:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = genValue(r, depth+1)
		}
		return l
	case 6:
		l := make([]string, r.IntN(4))
		for i := range l {
			l[i] = genStrs[r.IntN(len(genStrs))]
		}
		return l
	case 7:
		return genMap(r, depth+1)
	default:
		m := map[any]any{}
		for range r.IntN(4) {
			if r.IntN(4) == 0 {
				m[r.IntN(3)] = genValue(r, depth+1) // a key that is not a string
			} else {
				m[genKeys[r.IntN(len(genKeys))]] = genValue(r, depth+1)
			}
		}
		return m
	}
}

func genMap(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(6) {
		m[genKeys[r.IntN(len(genKeys))]] = genValue(r, depth)
	}
	return m
}

func genGrains(r *rand.Rand) map[string]any {
	g := genMap(r, 0)
	if r.IntN(2) == 0 {
		var ips []any
		for range r.IntN(3) {
			ips = append(ips, genStrs[r.IntN(len(genStrs))])
		}
		g["ipv4"] = ips
	}
	if r.IntN(3) == 0 {
		g["ipv6"] = []string{"::1", "fe80::1%eth0", "2001:db8::1"}[:r.IntN(4)]
	}
	return g
}

// genTerm returns one compound term, written with delimiter d.
func genTerm(r *rand.Rand) string {
	path := func() string {
		ks := make([]string, 1+r.IntN(3))
		for i := range ks {
			ks[i] = genKeys[r.IntN(len(genKeys))]
		}
		return strings.Join(ks, ":")
	}
	switch r.IntN(10) {
	case 0, 1, 2, 3:
		return "G@" + path() + ":" + genPats[r.IntN(len(genPats))]
	case 4:
		return "G|@" + strings.ReplaceAll(path(), ":", "|") + "|" + genPats[r.IntN(len(genPats))]
	case 5, 6:
		return "P@" + path() + ":" + genRes[r.IntN(len(genRes))]
	case 7:
		return "S@" + genNets[r.IntN(len(genNets))]
	case 8:
		return "G@*:" + genPats[r.IntN(len(genPats))]
	default:
		return "m*"
	}
}

func genExpr(r *rand.Rand) string {
	words := []string{genTerm(r)}
	for range r.IntN(3) {
		words = append(words, []string{"and", "or", "and not", "or not"}[r.IntN(4)], genTerm(r))
	}
	return strings.Join(words, " ")
}

// checkIndexAgrees matches random targets against random grains both ways.
func checkIndexAgrees(t *testing.T, seed uint64, exprs int) (matched, total int) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	g := genGrains(r)
	idx := Index(g)
	if idx == nil {
		t.Fatalf("seed %d: Index(%#v) = nil", seed, g)
	}
	byMaps := &Minion{ID: "m1", Grains: g}
	byIndex := &Minion{ID: "m1", Grains: g, Index: idx}
	for range exprs {
		expr := genExpr(r)
		m, err := Compile(expr, "compound", Options{})
		if err != nil {
			continue // a random regular expression may not compile
		}
		a, b := m.Match(byMaps), m.Match(byIndex)
		if a != b {
			t.Fatalf("seed %d: Compile(%q) on grains %#v: maps %v, index %v", seed, expr, g, a, b)
		}
		total++
		if a {
			matched++
		}
	}
	return matched, total
}

// TestIndexAgreesRandom is a property test: on random grains and random
// targets, the index and the map walk give the same answer.
func TestIndexAgreesRandom(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 300
	}
	matched, total := 0, 0
	for seed := range uint64(n) {
		m, tot := checkIndexAgrees(t, seed, 20)
		matched += m
		total += tot
	}
	// The generators must make targets that match and targets that do not,
	// or agreement would say little.
	if matched < total/20 || matched > total-total/20 {
		t.Errorf("%d of %d random targets matched, want between 5%% and 95%%", matched, total)
	}
	t.Logf("%d of %d random targets matched", matched, total)
}

// FuzzIndexAgrees is TestIndexAgreesRandom driven by the fuzzer's seeds.
func FuzzIndexAgrees(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		checkIndexAgrees(t, seed, 50)
	})
}

// TestIndexTermsAgree runs each generated term with each tgt_type and
// delimiter that reads it, on a fixed set of random grains.
func TestIndexTermsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var ms []*Minion
	for i := range 200 {
		g := genGrains(r)
		ms = append(ms, &Minion{ID: fmt.Sprintf("m%d", i), Grains: g})
	}
	idx := indexed(ms)
	try := func(expr, tgtType, delim string) {
		m, err := Compile(expr, tgtType, Options{Delimiter: delim})
		if err != nil {
			return
		}
		for i, mn := range ms {
			if a, b := m.Match(mn), m.Match(idx[i]); a != b {
				t.Fatalf("Compile(%q, %q, delimiter %q) on grains %#v: maps %v, index %v", expr, tgtType, delim, mn.Grains, a, b)
			}
		}
	}
	for _, k1 := range genKeys {
		for _, p := range genPats {
			try(k1+":"+p, "grain", "")
			try(k1+"|"+p, "grain", "|")
			try("*:"+k1+":"+p, "grain", "")
			for _, k2 := range genKeys[:6] {
				try(k1+"::"+k2+"::"+p, "grain", "::")
			}
		}
		for _, re := range genRes {
			try(k1+":"+re, "grain_pcre", "")
		}
	}
	for _, n := range genNets {
		try(n, "ipcidr", "")
	}
}

// TestGrainKeysAsSaltTraverses: grain targets follow keys as Salt's
// traverse_dict_and_list does (salt/utils/data.py, Salt 3006; see
// saltdata.Step): an integer key of a YAML or CBOR map is reached by its
// text (the key is yamlify_arg'ed and tried again), an integer key reaches
// an embedded dict's integer key before the list position, and a
// map[string]string is a dict. Walking the maps and reading the index agree.
func TestGrainKeysAsSaltTraverses(t *testing.T) {
	g := map[string]any{
		"ports":  map[any]any{80: "http", int64(443): "https", uint64(8080): "alt", "22": "ssh"},
		"slots":  []any{"first", map[any]any{int64(0): "embedded"}},
		"env":    map[string]string{"site": "lyon"},
		"labels": []any{map[string]string{"tier": "edge"}},
	}
	tests := []struct {
		expr string
		want bool
	}{
		{"G@ports:80:http", true},
		{"G@ports:443:https", true},
		{"G@ports:8080:alt", true},
		{"G@ports:22:ssh", true},
		{"G@ports:80:https", false},
		{"G@ports:81:*", false},
		{"G@slots:0:embedded", true},
		{"G@slots:0:first", false},
		{"G@slots:1:*", true},
		{"G@env:site:lyon", true},
		{"G@env:site", true},
		{"G@env:lyon", false},
		{"G@labels:tier:edge", true},
		{"P@ports:80:ht+p", true},
	}
	for _, tt := range tests {
		m, err := Compile(tt.expr, "compound", Options{})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.expr, err)
		}
		if got := m.Match(&Minion{ID: "x", Grains: g}); got != tt.want {
			t.Errorf("%s over the maps: got %v, want %v", tt.expr, got, tt.want)
		}
		if got := m.Match(&Minion{ID: "x", Grains: g, Index: Index(g)}); got != tt.want {
			t.Errorf("%s over the index: got %v, want %v", tt.expr, got, tt.want)
		}
	}
}
