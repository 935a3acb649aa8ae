package state

import (
	"fmt"
	"strings"
)

// Requisites are the requisite kinds a chunk waits on, in the order Salt's
// State.call_chunk looks at them (and lists the missing ones).
// "prerequired" is what a prereq (or prereq_in) adds to the state it
// names: that state runs for real after the one holding the prereq.
var Requisites = []string{
	"require", "require_any", "watch", "watch_any", "prereq",
	"onfail", "onfail_any", "onfail_all", "onchanges", "onchanges_any", "prerequired",
}

// ordering are the requisites that make a chunk run after its targets
// (prereq does not: its target runs in test mode first, then for real
// after, through the target's prerequired).
var ordering = map[string]bool{
	"require": true, "require_any": true, "watch": true, "watch_any": true,
	"onfail": true, "onfail_any": true, "onfail_all": true,
	"onchanges": true, "onchanges_any": true, "prerequired": true,
}

// Reqs is a chunk's requisite list of one kind (c[kind]) as a list of
// references: a bare string is {"id": s}, and a lone mapping is one
// reference.
func Reqs(c Chunk, kind string) []any {
	switch v := c[kind].(type) {
	case nil:
		return nil
	case []any:
		return v
	case []map[string]any:
		out := make([]any, len(v))
		for i, m := range v {
			out[i] = m
		}
		return out
	default:
		return []any{v}
	}
}

// ref is a requisite reference trimmed as Salt's trim_req does: a string
// s is {"id": s}; "file.managed: x" is "file: x". ok is false for a
// reference that names nothing (an empty map, a nil value).
func ref(req any) (key string, val any, ok bool) {
	switch r := req.(type) {
	case string:
		return "id", r, true
	case map[string]any:
		if len(r) == 0 {
			return "", nil, false
		}
		key = first(r)
		val = r[key]
		if i := strings.Index(key, "."); i >= 0 {
			key = key[:i]
		}
		return key, val, val != nil
	}
	return "", nil, false
}

// Matches resolves one requisite reference as Salt's
// State.check_requisite does, giving the indexes (into low, in low's
// order) of the chunks it names:
//   - "id-or-name" (a bare string) or {"id": "x"}: chunks whose __id__ or
//     name matches x (a glob, fnmatch) whatever their module;
//   - {"<module>": "x"} (e.g. {"file": "/etc/motd"}, or "file.managed",
//     trimmed to "file"): chunks of that module whose __id__ or name
//     matches x;
//   - {"sls": "web.*"}: every chunk whose __sls__ matches.
//
// A number or boolean value matches its text; a list or mapping value
// matches nothing.
func Matches(low []Chunk, req any) []int {
	return newIndex(low).matches(req)
}

// index finds the chunks a reference names: by map for a plain name, by
// scanning for a glob. The chunks of a name are a list through nodes, in
// low's order.
type index struct {
	low []Chunk
	// byName and bySLS give a name's (ID or name argument's) and an
	// SLS's first node + 1.
	byName, bySLS map[string]int32
	nodes         []indexNode
	// state, name, id and sls are the chunks' values as text.
	state, name, id, sls []string
}

type indexNode struct{ chunk, next int32 } // next: node + 1, 0 at the end

func newIndex(low []Chunk) *index {
	n := len(low)
	text := make([]string, 4*n)
	x := &index{low: low, byName: make(map[string]int32, 2*n), bySLS: make(map[string]int32, n), nodes: make([]indexNode, 0, 3*n),
		state: text[:n:n], name: text[n : 2*n : 2*n], id: text[2*n : 3*n : 3*n], sls: text[3*n:]}
	add := func(m map[string]int32, k string, i int) {
		x.nodes = append(x.nodes, indexNode{int32(i), m[k]})
		m[k] = int32(len(x.nodes))
	}
	// Backwards, each node going first: the lists end up in low's order.
	for i := n - 1; i >= 0; i-- {
		c := low[i]
		x.state[i], x.name[i], x.id[i], x.sls[i] = pyStr(c["state"]), pyStr(c["name"]), pyStr(c["__id__"]), pyStr(c["__sls__"])
		add(x.byName, x.id[i], i)
		if x.name[i] != x.id[i] {
			add(x.byName, x.name[i], i)
		}
		add(x.bySLS, x.sls[i], i)
	}
	return x
}

func (x *index) matches(req any) []int { return x.appendMatches(nil, req) }

// appendMatches appends the chunks req names to out.
func (x *index) appendMatches(out []int, req any) []int {
	key, val, ok := ref(req)
	if !ok || !hashable(val) {
		return out
	}
	pat := pyStr(val)
	if !strings.ContainsAny(pat, "*?[") {
		m := x.byName
		if key == "sls" {
			m = x.bySLS
		}
		for n := m[pat]; n != 0; n = x.nodes[n-1].next {
			i := int(x.nodes[n-1].chunk)
			if key == "sls" || key == "id" || x.state[i] == key {
				out = append(out, i)
			}
		}
		return out
	}
	for i := range x.low {
		if key == "sls" {
			if fnmatch(x.sls[i], pat) {
				out = append(out, i)
			}
			continue
		}
		if fnmatch(x.name[i], pat) || fnmatch(x.id[i], pat) {
			if key == "id" || x.state[i] == key {
				out = append(out, i)
			}
		}
	}
	return out
}

// Problem is a requisite error found before anything runs.
type Problem struct {
	// Chunk is the index in low of the state at fault: the one with the
	// missing requisites, or the first of a cycle.
	Chunk int
	// Missing is Salt's comment for a state whose requisites name no
	// chunk ("The following requisites were not found:\n..."): the state
	// fails with it and result False, as Salt's call_chunk does; states
	// that require it then fail with "One or more requisite failed".
	// Empty for a cycle.
	Missing string
	// Cycle lists the chunk indexes of a requisite cycle, in requisite
	// order (each waits on the next, the last on the first); nil for a
	// missing requisite.
	Cycle []int
	// Comment is the problem in Salt's words: Missing, or for a cycle
	// Salt's "Recursive requisites were found: ..." (the message of
	// Salt's requisite graph, which refuses cycles before running).
	Comment string
}

// Problems finds, before anything runs, the requisites that name no
// chunk and the requisite cycles of low (in low's order). Watch is
// reported as watch (Salt lists it under require when the module has no
// mod_watch; the engine knows which have one).
func Problems(low []Chunk) []Problem {
	reqs := lowReqs(low)
	if len(reqs) == 0 {
		return nil // nothing to find, and no cycle
	}
	return problems(low, newIndex(low), reqs)
}

// chunkReqs are one chunk's requisites, by kind (Requisites' order), as
// Reqs gives them.
type chunkReqs struct {
	chunk int
	by    [numRequisites][]any
}

// numRequisites is len(Requisites).
const numRequisites = 11

// lowReqs are the requisites of the chunks of low that have some, in
// low's order.
func lowReqs(low []Chunk) []chunkReqs {
	var out []chunkReqs
	for i, c := range low {
		var cr *chunkReqs
		for k, v := range c {
			if v == nil {
				continue
			}
			kind := requisiteKind(k)
			if kind < 0 {
				continue
			}
			if cr == nil {
				out = append(out, chunkReqs{chunk: i})
				cr = &out[len(out)-1]
			}
			cr.by[kind] = Reqs(c, k)
		}
	}
	return out
}

// requisiteKind is k's index in Requisites, or -1 (TestRequisiteKind
// keeps the two alike).
func requisiteKind(k string) int {
	switch k {
	case "require":
		return 0
	case "require_any":
		return 1
	case "watch":
		return 2
	case "watch_any":
		return 3
	case "prereq":
		return 4
	case "onfail":
		return 5
	case "onfail_any":
		return 6
	case "onfail_all":
		return 7
	case "onchanges":
		return 8
	case "onchanges_any":
		return 9
	case "prerequired":
		return 10
	}
	return -1
}

func problems(low []Chunk, x *index, reqs []chunkReqs) []Problem {
	var out []Problem
	var buf []int
	for _, cr := range reqs {
		i := cr.chunk
		var b strings.Builder
		for k, kind := range Requisites {
			var lost []string
			for _, r := range cr.by[k] {
				key, val, ok := ref(r)
				if !ok {
					continue
				}
				if buf = x.appendMatches(buf[:0], r); len(buf) == 0 {
					lost = append(lost, fmt.Sprintf("%s%s: %s\n", strings.Repeat(" ", 23), key, pyStr(val)))
				}
			}
			if len(lost) > 0 {
				fmt.Fprintf(&b, "%s%s:\n", strings.Repeat(" ", 19), kind)
				for _, l := range lost {
					b.WriteString(l)
				}
			}
		}
		if b.Len() > 0 {
			m := "The following requisites were not found:\n" + b.String()
			out = append(out, Problem{Chunk: i, Missing: m, Comment: m})
		}
	}
	g := newGraphIndex(low, x, reqs)
	if g.full {
		out = append(out, Problem{Chunk: 0, Comment: fmt.Sprintf("Too many requisites: more than %d between %d states", maxEdges, len(low))})
	}
	for _, cyc := range g.cycles(maxCycles) {
		parts := make([]string, len(cyc))
		idx := make([]int, len(cyc))
		for k, e := range cyc {
			idx[k] = e.from
			from, to, kind := e.from, e.to, e.kind
			if kind == "prerequired" {
				from, to, kind = to, from, "prereq"
			}
			parts[k] = fmt.Sprintf("(%s, '%s', %s)", node(low[from]), kind, node(low[to]))
		}
		out = append(out, Problem{Chunk: idx[0], Cycle: idx, Comment: "Recursive requisites were found: " + strings.Join(parts, ", ")})
	}
	return out
}

// maxCycles bounds the cycles reported for one low state.
const maxCycles = 16

func node(c Chunk) string {
	return fmt.Sprintf("{'SLS': %s, 'ID': %s, 'NAME': %s}", pyRepr(c["__sls__"]), pyRepr(c["__id__"]), pyRepr(c["name"]))
}

// Check is Problems as strings, for refusing a whole run: a missing
// requisite as "ID '<id>' in SLS '<sls>': " and Salt's comment, a cycle as
// Salt's "Recursive requisites were found: ..." message. Empty: every
// requisite names a chunk and there is no cycle.
func Check(low []Chunk) []string {
	var out []string
	for _, p := range Problems(low) {
		if p.Cycle != nil {
			out = append(out, p.Comment)
			continue
		}
		c := low[p.Chunk]
		out = append(out, fmt.Sprintf("ID '%s' in SLS '%s': %s", pyStr(c["__id__"]), pyStr(c["__sls__"]), p.Comment))
	}
	return out
}

type edge struct {
	from, to int
	kind     string
}

// graph is "runs after": deps[i] are the chunks i waits on, in Salt's
// requisite order.
type graph struct {
	deps  [][]edge
	edges int
	full  bool // more than maxEdges: the rest were left out
}

// maxEdges bounds the requisite graph (an SLS requirement fans out to
// every chunk of it).
const maxEdges = 1 << 21

func (g *graph) add(i int, e edge) {
	if g.edges >= maxEdges {
		g.full = true
		return
	}
	g.edges++
	g.deps[i] = append(g.deps[i], e)
}

func newGraph(low []Chunk) *graph {
	reqs := lowReqs(low)
	if len(reqs) == 0 {
		return &graph{deps: make([][]edge, len(low))}
	}
	return newGraphIndex(low, newIndex(low), reqs)
}

func newGraphIndex(low []Chunk, x *index, reqs []chunkReqs) *graph {
	g := &graph{deps: make([][]edge, len(low))}
	direct := make([][]edge, len(low))
	n := 0
	var buf []int
	for _, cr := range reqs {
		i := cr.chunk
		for k, kind := range Requisites {
			if !ordering[kind] {
				continue
			}
			for _, r := range cr.by[k] {
				buf = x.appendMatches(buf[:0], r)
				for _, j := range buf {
					if n++; n > maxEdges {
						g.full = true
						break
					}
					direct[i] = append(direct[i], edge{i, j, kind})
				}
			}
		}
	}
	for _, cr := range reqs {
		i := cr.chunk
		for k, kind := range Requisites {
			if kind == "prereq" {
				// Salt runs a prereq's target in test mode before the
				// holder, and that test run first runs what the target
				// waits on (but its prerequired), for real: the holder
				// waits on those, at the prereq's place.
				for _, r := range cr.by[k] {
					buf = x.appendMatches(buf[:0], r)
					for _, j := range buf {
						for _, e := range direct[j] {
							if e.to != i && e.kind != "prerequired" {
								g.add(i, edge{i, e.to, "prereq"})
							}
						}
					}
				}
				continue
			}
			for _, e := range direct[i] {
				if e.kind == kind {
					g.add(i, e)
				}
			}
		}
	}
	return g
}

// cycles finds up to max cycles by depth-first search (iterative, so a
// hostile low state cannot exhaust the stack).
func (g *graph) cycles(max int) [][]edge {
	const (
		white = iota
		grey
		black
	)
	color := make([]int8, len(g.deps))
	var out [][]edge
	type frame struct{ n, next int }
	var path []edge // edges from the root to the top frame
	for root := range g.deps {
		if color[root] != white {
			continue
		}
		stack := []frame{{root, 0}}
		color[root] = grey
		path = path[:0]
		for len(stack) > 0 && len(out) < max {
			top := &stack[len(stack)-1]
			if top.next >= len(g.deps[top.n]) {
				color[top.n] = black
				stack = stack[:len(stack)-1]
				if len(path) > 0 {
					path = path[:len(path)-1]
				}
				continue
			}
			e := g.deps[top.n][top.next]
			top.next++
			switch color[e.to] {
			case white:
				color[e.to] = grey
				path = append(path, e)
				stack = append(stack, frame{e.to, 0})
			case grey:
				// A back edge: the cycle is the path from e.to on, then e.
				k := len(path)
				for k > 0 && path[k-1].from != e.to {
					k--
				}
				if e.from == e.to {
					k = len(path)
				} else if k > 0 {
					k--
				}
				cyc := append(append([]edge(nil), path[k:]...), e)
				out = append(out, cyc)
			}
		}
		if len(out) >= max {
			break
		}
	}
	return out
}

// Sequence is the order in which Salt's State.call_chunks runs low
// (already ordered by Order) for real: each chunk in turn, after the
// chunks it waits on (require, watch, onchanges, onfail and their _any
// and _all forms, prerequired), those first, depth first, in requisite
// order. It gives indexes into low, each once. Chunks on a requisite
// cycle (see Problems) are left out: Salt fails them.
//
// A prereq's target is not run before the prereq's holder: the engine
// runs it in test mode (Salt's __prereq__) when it reaches the holder,
// and for real later, where Sequence puts it.
func Sequence(low []Chunk) []int {
	g := newGraph(low)
	onCycle := map[int]bool{}
	for _, cyc := range g.cycles(len(low) + 1) {
		for _, e := range cyc {
			onCycle[e.from] = true
		}
	}
	done := make([]bool, len(low))
	active := make([]bool, len(low))
	out := make([]int, 0, len(low))
	type frame struct{ n, next int }
	for root := range low {
		if done[root] {
			continue
		}
		stack := []frame{{root, 0}}
		active[root] = true
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(g.deps[top.n]) {
				d := g.deps[top.n][top.next].to
				top.next++
				if !done[d] && !active[d] {
					active[d] = true
					stack = append(stack, frame{d, 0})
				}
				continue
			}
			n := top.n
			stack = stack[:len(stack)-1]
			active[n] = false
			done[n] = true
			if !onCycle[n] && !dependsOnCycle(g, n, onCycle) {
				out = append(out, n)
			}
		}
	}
	return out
}

// dependsOnCycle: n waits on a chunk that is on a cycle or left out.
func dependsOnCycle(g *graph, n int, bad map[int]bool) bool {
	for _, e := range g.deps[n] {
		if bad[e.to] {
			bad[n] = true
			return true
		}
	}
	return false
}

// ListenError is the return Salt gives for a listen or listen_in that
// names a state that does not exist: its tag and ret (without
// __run_num__, which the engine adds, counting on).
type ListenError struct {
	Tag string
	Ret map[string]any
}

// Listen is Salt's State.call_listen, run after every chunk: the
// mod_watch chunks to run, for each listen (and listen_in) whose target
// ran with changes (changed reports it by the target's Tag), in Salt's
// order: copies of the listening chunks with "fun" "mod_watch", "sfun"
// the original function, "__id__" "listener_<id>" and no requisites;
// and the errors for references to states that do not exist.
func Listen(low []Chunk, changed func(tag string) bool) (watchers []Chunk, errs []ListenError) {
	type cref struct{ state, id, name string }
	var crefs []cref
	crefChunk := map[cref]Chunk{}
	type listener struct {
		key cref
		to  []any
	}
	var listeners []listener
	for _, c := range low {
		k := cref{pyStr(c["state"]), pyStr(c["__id__"]), pyStr(c["name"])}
		if _, ok := crefChunk[k]; !ok {
			crefs = append(crefs, k)
		}
		crefChunk[k] = c
		if _, ok := c["listen"]; ok {
			listeners = append(listeners, listener{k, Reqs(c, "listen")})
		}
		for _, l := range Reqs(c, "listen_in") {
			m, ok := l.(map[string]any)
			if !ok {
				continue
			}
			for _, key := range sortedKeys(m) {
				listeners = append(listeners, listener{cref{key, pyStr(m[key]), "lookup"}, []any{map[string]any{pyStr(c["state"]): c["__id__"]}}})
			}
		}
	}
	in := func(v string, r cref) bool { return v == r.state || v == r.id || v == r.name }
	seenErr := map[string]bool{}
	addErr := func(state, val string) {
		tag := fmt.Sprintf("Listen_Error_|-listen_%s_|-listen_%s_|-Listen_Error", val, state)
		if seenErr[tag] {
			return
		}
		seenErr[tag] = true
		errs = append(errs, ListenError{Tag: tag, Ret: map[string]any{
			"comment": fmt.Sprintf("Referenced state %s: %s does not exist", state, val),
			"name":    fmt.Sprintf("listen_%s:%s", state, val),
			"result":  false,
			"changes": map[string]any{},
		}})
	}
	seen := map[string]bool{}
	for _, l := range listeners {
		for _, to := range l.to {
			tm, ok := to.(map[string]any)
			if !ok {
				s := pyStr(to)
				for _, c := range low {
					if tm == nil && (pyStr(c["__id__"]) == s || pyStr(c["name"]) == s) {
						tm = map[string]any{pyStr(c["state"]): c["__id__"]}
					}
				}
				if tm == nil {
					continue
				}
			}
			for _, lkey := range sortedKeys(tm) {
				lval := pyStr(tm[lkey])
				exists := false
				for _, r := range crefs {
					exists = exists || (lkey == r.state && in(lval, r))
				}
				if !exists {
					addErr(lkey, lval)
					continue
				}
				for _, r := range crefs {
					if lkey != r.state || !in(lval, r) || !changed(Tag(crefChunk[r])) {
						continue
					}
					target := false
					for _, r2 := range crefs {
						target = target || (l.key.state == r2.state && in(l.key.id, r2))
					}
					if !target {
						addErr(l.key.state, l.key.id)
						continue
					}
					for _, r2 := range crefs {
						if l.key.state != r2.state || !in(l.key.id, r2) {
							continue
						}
						w := Chunk(deepCopy(map[string]any(crefChunk[r2])).(map[string]any))
						w["sfun"] = w["fun"]
						w["fun"] = "mod_watch"
						w["__id__"] = "listener_" + pyStr(w["__id__"])
						for k := range requisiteKeywords {
							delete(w, k)
						}
						if t := Tag(w); !seen[t] {
							seen[t] = true
							watchers = append(watchers, w)
						}
					}
				}
			}
		}
	}
	return watchers, errs
}
