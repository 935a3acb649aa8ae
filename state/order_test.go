package state

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOrder: salt/state.py State.order_chunks, as the order
// documentation and Salt's code pin it: numbers first (ties by
// state+name+fun), "first" at 0, no order (or a word) at cap, "last" and
// negatives past everything, name_order inside an order. Salt's cap is
// 100 past the first int order that raises it, scanning in list order (2
// here, so 102, although 7 is larger): kept as Salt has it.
func TestOrder(t *testing.T) {
	low := []Chunk{
		{"state": "test", "name": "z", "fun": "nop", "__id__": "none"},
		{"state": "test", "name": "b", "fun": "nop", "__id__": "two-b", "order": 2},
		{"state": "cmd", "name": "a", "fun": "run", "__id__": "two-cmd", "order": 2},
		{"state": "test", "name": "a", "fun": "nop", "__id__": "two-a", "order": 2},
		{"state": "test", "name": "l", "fun": "nop", "__id__": "last", "order": "last"},
		{"state": "test", "name": "m", "fun": "nop", "__id__": "minus2", "order": -2},
		{"state": "test", "name": "f", "fun": "nop", "__id__": "first", "order": "first"},
		{"state": "test", "name": "x", "fun": "nop", "__id__": "junk", "order": "soon"},
		{"state": "pkg", "name": "vim", "fun": "installed", "__id__": "names2", "order": 7, "name_order": 2},
		{"state": "pkg", "name": "zsh", "fun": "installed", "__id__": "names1", "order": 7, "name_order": 1},
		{"state": "test", "name": "h", "fun": "nop", "__id__": "half", "order": 1.5},
	}
	got := ids(Order(low))
	want := []string{"first", "half", "two-cmd", "two-a", "two-b", "names1", "names2", "junk", "none", "minus2", "last"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	orders := map[string]any{}
	for _, c := range low {
		orders[c.ID()] = c["order"]
	}
	wantOrders := map[string]any{"first": 0, "half": 1.5, "two-cmd": 2, "two-a": 2, "two-b": 2, "names1": 7.0001, "names2": 7.0002,
		"none": 102, "junk": 102, "minus2": 1000100, "last": 1000102}
	if diff := cmp.Diff(wantOrders, orders); diff != "" {
		t.Errorf("orders (-want +got):\n%s", diff)
	}
}

// TestMatches: requisite references resolve as salt/state.py
// State.check_requisite does (fnmatch on name or ID, the module unless
// "id", sls globs, "file.managed" trimmed to "file").
func TestMatches(t *testing.T) {
	low := []Chunk{
		{"state": "file", "name": "/etc/motd", "__id__": "motd", "__sls__": "base.motd", "fun": "managed"},
		{"state": "service", "name": "nginx", "__id__": "web", "__sls__": "web.nginx", "fun": "running"},
		{"state": "pkg", "name": "nginx", "__id__": "nginx-pkg", "__sls__": "web.pkg", "fun": "installed"},
		{"state": "cmd", "name": 42, "__id__": "answer", "__sls__": "misc", "fun": "run"},
	}
	tests := []struct {
		req  any
		want []int
	}{
		{map[string]any{"file": "motd"}, []int{0}},
		{map[string]any{"file": "/etc/motd"}, []int{0}},
		{map[string]any{"file.managed": "/etc/*"}, []int{0}},
		{map[string]any{"service": "motd"}, nil},
		{map[string]any{"id": "nginx"}, []int{1, 2}},
		{"nginx*", []int{1, 2}},
		{map[string]any{"sls": "web.*"}, []int{1, 2}},
		{map[string]any{"sls": "web"}, nil},
		{map[string]any{"cmd": 42}, []int{3}},
		{map[string]any{"cmd": []any{"x"}}, nil},
		{map[string]any{}, nil},
		{nil, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Matches(low, tc.req)); diff != "" {
			t.Errorf("Matches(%v) (-want +got):\n%s", tc.req, diff)
		}
	}
}

// TestCycles: cycles longer than the two salt/state.py verify_high sees
// are found before running, with the message of Salt's requisite graph
// (tests/pytests/functional/modules/state/requisites/test_mixed.py, Salt
// 3007: "Recursive requisites were found: ..."), and Sequence leaves out
// the chunks on the cycle and those that wait on them.
func TestCycles(t *testing.T) {
	files := tree{"base/requisite.sls": `
		A:
		  cmd.run:
		    - name: echo A
		    - require:
		      - cmd: B
		B:
		  cmd.run:
		    - name: echo B
		    - watch:
		      - cmd: C
		C:
		  cmd.run:
		    - name: echo C
		    - onchanges:
		      - cmd: A
		D:
		  cmd.run:
		    - name: echo D
		    - require:
		      - cmd: A
		E:
		  cmd.run:
		    - name: echo E
		`}
	low := compile(t, files, "requisite")
	want := []string{"Recursive requisites were found: " +
		"({'SLS': 'requisite', 'ID': 'A', 'NAME': 'echo A'}, 'require', {'SLS': 'requisite', 'ID': 'B', 'NAME': 'echo B'}), " +
		"({'SLS': 'requisite', 'ID': 'B', 'NAME': 'echo B'}, 'watch', {'SLS': 'requisite', 'ID': 'C', 'NAME': 'echo C'}), " +
		"({'SLS': 'requisite', 'ID': 'C', 'NAME': 'echo C'}, 'onchanges', {'SLS': 'requisite', 'ID': 'A', 'NAME': 'echo A'})"}
	if diff := cmp.Diff(want, Check(low)); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"E"}, runIDs(low)); diff != "" {
		t.Errorf("Sequence (-want +got):\n%s", diff)
	}
	self := []Chunk{{"state": "test", "name": "a", "__id__": "a", "__sls__": "s", "fun": "nop", "require": []any{map[string]any{"sls": "s"}}}}
	if got := Check(self); len(got) != 1 {
		t.Errorf("a state requiring its own SLS: got %q, want one cycle", got)
	}
}

// refSequence is a literal transcription of salt/state.py
// State.call_chunks / call_chunk, for ordering only: each chunk in turn,
// its requisites first (recursively, in Salt's requisite order), a
// prereq's target's own requisites (but not the target) before the
// holder; a chunk found active again is a cycle. It matches references
// exactly (the generator below makes no globs), independently of Matches.
func refSequence(low []Chunk) ([]int, bool) {
	match := func(req any) []int {
		var key, val string
		switch r := req.(type) {
		case string:
			key, val = "id", r
		case map[string]any:
			for k, v := range r {
				key, val = k, v.(string)
			}
		}
		var out []int
		for i, c := range low {
			switch {
			case key == "sls":
				if c["__sls__"] == val {
					out = append(out, i)
				}
			case (c["name"] == val || c["__id__"] == val) && (key == "id" || c["state"] == key):
				out = append(out, i)
			}
		}
		return out
	}
	kinds := []string{"require", "require_any", "watch", "watch_any", "prereq", "onfail", "onfail_any", "onchanges", "onchanges_any", "prerequired"}
	running := map[int]bool{}
	active := map[int]bool{}
	cycle := false
	var seq []int
	var call func(i int, pre bool, holder int)
	call = func(i int, pre bool, holder int) {
		was := active[i]
		active[i] = true
		defer func() { active[i] = was }()
		for _, kind := range kinds {
			if pre && kind == "prerequired" {
				continue
			}
			l, _ := low[i][kind].([]any)
			for _, r := range l {
				for _, j := range match(r) {
					if running[j] {
						continue
					}
					if kind == "prereq" {
						if pre {
							continue
						}
						call(j, true, i)
						continue
					}
					if active[j] {
						// The prereq's holder, waited on by its own
						// target's test run, is Salt's "prereq recursive"
						// case, not a cycle.
						cycle = cycle || !pre || j != holder
						continue
					}
					call(j, false, -1)
				}
			}
		}
		if !pre && !running[i] {
			running[i] = true
			seq = append(seq, i)
		}
	}
	for i := range low {
		if !running[i] {
			call(i, false, -1)
		}
	}
	return seq, cycle
}

// TestSequenceProperty: Order then Sequence never runs a chunk before one
// it waits on, and runs chunks in the order the transcription of Salt's
// call_chunk does, on seeded random low states.
func TestSequenceProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(16))
	orders := []any{nil, 1, 2, 3, "first", "last", -1, 2.5}
	kinds := []string{"require", "watch", "onchanges", "onfail", "require_any", "prereq"}
	checked := 0
	for iter := 0; iter < 3000; iter++ {
		n := 1 + rng.Intn(12)
		low := make([]Chunk, n)
		for i := range low {
			c := Chunk{"state": []string{"test", "cmd"}[rng.Intn(2)], "fun": "nop",
				"__id__": fmt.Sprintf("s%d", i), "name": fmt.Sprintf("n%d", i), "__sls__": fmt.Sprintf("sls%d", rng.Intn(4))}
			if o := orders[rng.Intn(len(orders))]; o != nil {
				c["order"] = o
			}
			for k := rng.Intn(3); k > 0; k-- {
				kind := kinds[rng.Intn(len(kinds))]
				j := rng.Intn(n)
				var r any
				switch rng.Intn(4) {
				case 0:
					r = fmt.Sprintf("s%d", j)
				case 1:
					r = map[string]any{"test": fmt.Sprintf("n%d", j)}
				case 2:
					r = map[string]any{"cmd": fmt.Sprintf("s%d", j)}
				default:
					r = map[string]any{"sls": fmt.Sprintf("sls%d", rng.Intn(4))}
				}
				l, _ := c[kind].([]any)
				c[kind] = append(l, r)
			}
			low[i] = c
		}
		// prereq adds prerequired to its targets, as requisite_in does.
		for i, c := range low {
			l, _ := c["prereq"].([]any)
			for _, r := range l {
				for _, j := range Matches(low, r) {
					p, _ := low[j]["prerequired"].([]any)
					low[j]["prerequired"] = append(p, map[string]any{pyStr(c["state"]): low[i]["__id__"]})
				}
			}
		}
		Order(low)
		seq := Sequence(low)
		ref, cycle := refSequence(low)
		hasCycle := false
		for _, p := range Problems(low) {
			hasCycle = hasCycle || p.Cycle != nil
		}
		if hasCycle != cycle {
			t.Fatalf("iteration %d: Problems cycle %v, reference %v; low %v", iter, hasCycle, cycle, low)
		}
		// Never before a chunk it waits on.
		pos := map[int]int{}
		for k, i := range seq {
			pos[i] = k
		}
		g := newGraph(low)
		for _, i := range seq {
			for _, e := range g.deps[i] {
				if p, ok := pos[e.to]; !ok || p > pos[i] {
					t.Fatalf("iteration %d: %s runs before %s, which it waits on (%s)", iter, low[i].ID(), low[e.to].ID(), e.kind)
				}
			}
		}
		if cycle {
			continue
		}
		checked++
		if len(seq) != n {
			t.Fatalf("iteration %d: sequence %v leaves chunks out", iter, seq)
		}
		if diff := cmp.Diff(ref, seq); diff != "" {
			t.Fatalf("iteration %d: sequence (-reference +got):\n%s\nlow %v", iter, diff, low)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d acyclic low states checked", checked)
	}
}

// TestFnmatch: Python's fnmatch.fnmatch (POSIX: no case folding; "*"
// crosses dots and slashes).
func TestFnmatch(t *testing.T) {
	tests := []struct {
		name, pat string
		want      bool
	}{
		{"web.nginx", "web.*", true}, {"web", "web.*", false}, {"/etc/a/b", "/etc/*", true},
		{"abc", "a?c", true}, {"ac", "a?c", false}, {"aé", "a?", true}, {"aéb", "a*b", true},
		{"x", "", false}, {"", "*", true}, {"", "", true}, {"aaa", "a*a*a", true}, {"aa", "a*a*a", false},
		{"b1", "[ab]1", true}, {"c1", "[!ab]1", true}, {"a1", "[!ab]1", false}, {"m", "[a-z]", true},
		{"[x", "[x", true}, {"]", "[]]", true}, {"Web", "web", false}, {"mississippi", "*sip*", true},
	}
	for _, tc := range tests {
		if got := fnmatch(tc.name, tc.pat); got != tc.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", tc.name, tc.pat, got, tc.want)
		}
	}
}

// TestCompareJoined: compareJoined orders as comparing the joined texts
// (Salt's order_chunks sorts by state + name + fun as one string).
func TestCompareJoined(t *testing.T) {
	parts := []string{"", "a", "ab", "b", "aa", "é", "a\x00"}
	var all [][3]string
	for _, x := range parts {
		for _, y := range parts {
			for _, z := range parts {
				all = append(all, [3]string{x, y, z})
			}
		}
	}
	for _, a := range all {
		for _, b := range all {
			want := strings.Compare(a[0]+a[1]+a[2], b[0]+b[1]+b[2])
			if got := compareJoined(a, b); got != want {
				t.Fatalf("compareJoined(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
}

// TestRequisiteKind: requisiteKind numbers Requisites in order, and
// nothing else.
func TestRequisiteKind(t *testing.T) {
	if len(Requisites) != numRequisites {
		t.Fatalf("got %d requisites, want numRequisites %d", len(Requisites), numRequisites)
	}
	for i, k := range Requisites {
		if got := requisiteKind(k); got != i {
			t.Errorf("requisiteKind(%q) = %d, want %d", k, got, i)
		}
	}
	for _, k := range []string{"", "name", "require_in", "listen", "use", "onfail_stop"} {
		if got := requisiteKind(k); got != -1 {
			t.Errorf("requisiteKind(%q) = %d, want -1", k, got)
		}
	}
}
