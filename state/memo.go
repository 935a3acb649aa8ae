package state

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/halite-fleet/halite/render/sls"
)

// Memo keeps, between the compiles that share it, what render_state makes
// of one SLS file on its own: the file's IDs with their state
// declarations handled (short forms, "mod.fun:" keys, __sls__, __env__),
// its extend, exclude and include declarations and its errors, and the
// same IDs with state_auto_order's numbers from a given first number. All
// of that is a function of the file's entries, SLS name, env and path, so
// a compile that loads the same entries (the same slice: a Loader that
// caches its renderings) again takes it from the Memo instead of making
// it again; what it merges, extends and orders from there is its own
// (the shared parts are read only: the compiler copies what it changes).
// Each kept ID body's chunks are made once too: the compiles' low states
// share them (Compiled.Low).
//
// A file is kept the second time its entries are seen, so entries a
// Loader renders anew for every compile cost nothing to keep. A Memo is
// safe for concurrent use; it keeps its entries alive, so it is meant to
// live as long as the Loader's renderings (the master keeps one per
// compile call).
type Memo struct {
	mu    sync.Mutex
	files map[memoKey]*fileHigh
	seen  map[memoKey]bool
	ids   atomic.Int64 // how many IDs the last compile had
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{files: map[memoKey]*fileHigh{}, seen: map[memoKey]bool{}}
}

// maxMemoFiles bounds what a Memo keeps; beyond it, it starts again.
const maxMemoFiles = 4096

// maxMemoOrders bounds the first order numbers kept per file.
const maxMemoOrders = 16

// idsHint is how many IDs the high data of a compile may have: as many
// as the last one's.
func (m *Memo) idsHint() int {
	if m == nil {
		return 0
	}
	return int(min(m.ids.Load(), MaxChunks))
}

func (m *Memo) setIDsHint(n int) {
	if m != nil {
		m.ids.Store(int64(n))
	}
}

// CompileMatches is CompileMatches, with m's files.
func (m *Memo) CompileMatches(ld Loader, matches []EnvSLS) Compiled {
	return compileMatches(ld, matches, false, m)
}

// Highstate is Highstate, with m's files.
func (m *Memo) Highstate(ld Loader, matches []EnvSLS) Compiled {
	return compileMatches(ld, matches, true, m)
}

type memoKey struct {
	entries         *sls.Entry // the slice's first element: its identity
	n               int
	file, name, env string
}

// file is the fileHigh of entries (not empty), kept or made now.
func (m *Memo) file(file, name, env string, entries []sls.Entry) *fileHigh {
	if m == nil {
		return newFileHigh(file, name, env, entries, false)
	}
	k := memoKey{&entries[0], len(entries), file, name, env}
	m.mu.Lock()
	fh := m.files[k]
	keep := m.seen[k]
	if fh == nil && !keep {
		if len(m.seen) >= maxMemoFiles {
			clear(m.seen)
		}
		m.seen[k] = true
	}
	m.mu.Unlock()
	if fh != nil {
		return fh
	}
	fh = newFileHigh(file, name, env, entries, keep)
	if keep {
		m.mu.Lock()
		if len(m.files) >= maxMemoFiles {
			clear(m.files)
		}
		if old := m.files[k]; old != nil {
			fh = old // another compile made it meanwhile
		} else {
			m.files[k] = fh
		}
		m.mu.Unlock()
	}
	return fh
}

// fileHigh is one SLS file's own high data, as render_state makes it
// before its includes are rendered. Read only once made, but for orders.
type fileHigh struct {
	file    string
	ids     *omap // after _handle_extend, _handle_exclude, _handle_state_decls
	extend  []*omap
	exclude []any
	include []any
	errs    []Error
	lines   map[string]int // line of each entry
	located map[string]bool

	kept   bool       // in a Memo: orders are kept
	mu     sync.Mutex // guards orders
	orders map[int]orderedIDs
}

// orderedIDs are a file's IDs with state_auto_order's numbers from a first
// number on, and how many numbers they took.
type orderedIDs struct {
	ids *omap
	n   int
}

func newFileHigh(file, name, env string, entries []sls.Entry, kept bool) *fileHigh {
	fh := &fileHigh{file: file, lines: make(map[string]int, len(entries)), kept: kept}
	st := &highData{ids: &omap{keys: make([]string, 0, len(entries)), m: make(map[string]any, len(entries))}}
	for _, e := range entries {
		var v any = e.Value
		if m, ok := e.Value.(map[string]any); ok {
			v = fromMap(m, e.Keys)
		}
		st.ids.set(e.ID, v)
		fh.lines[e.ID] = e.Line
	}
	if inc, ok := st.ids.get("include"); ok {
		if l, ok := inc.([]any); ok {
			fh.include = l
			st.ids.del("include")
		} else {
			fh.errs = append(fh.errs, fh.loc("include", fmt.Sprintf("Include Declaration in SLS %s is not formed as a list", name)))
		}
	}
	handleExtend(st, name, env, fh.loc, &fh.errs)
	handleExclude(st, name, fh.loc, &fh.errs)
	handleStateDecls(st, name, env, fh.loc, &fh.errs)
	if kept {
		addFacts(st.ids)
	}
	fh.located = make(map[string]bool, len(fh.lines))
	for id := range fh.lines {
		if st.ids.has(id) {
			fh.located[id] = true
		}
	}
	fh.ids, fh.extend, fh.exclude = st.ids, slices.Clip(st.extend), slices.Clip(st.exclude)
	return fh
}

// loc is an error at id's entry.
func (fh *fileHigh) loc(id, msg string) Error {
	if l, ok := fh.lines[id]; ok {
		return Error{Msg: msg, File: fh.file, Line: l}
	}
	return Error{Msg: msg, File: fh.file}
}

// ordered is the file's IDs with state_auto_order's numbers from next on.
func (fh *fileHigh) ordered(next int) orderedIDs {
	if !fh.kept {
		ids := fh.ids.clone()
		return orderedIDs{ids, autoOrder(ids, next)}
	}
	fh.mu.Lock()
	o, ok := fh.orders[next]
	fh.mu.Unlock()
	if ok {
		return o
	}
	ids := fh.ids.clone()
	o = orderedIDs{ids, autoOrder(ids, next)}
	addFacts(ids)
	fh.mu.Lock()
	if fh.orders == nil {
		fh.orders = map[int]orderedIDs{}
	}
	if len(fh.orders) < maxMemoOrders {
		fh.orders[next] = o
	}
	fh.mu.Unlock()
	return o
}

// bodyFacts are what the later stages of a compile find in one ID's body
// on their own (the body of a file a Memo keeps, which nothing changes):
// made once, the first time a compile asks.
type bodyFacts struct {
	id   string
	body *omap
	once sync.Once

	chunks []Chunk // compile_high_data's, to be copied
	err    error
	// reqIn: an argument is a requisite_in form, use or prereq
	// (requisite_in looks at the body).
	reqIn bool
	// verifyReqs: an argument is a require, watch, prereq or onchanges
	// list (verify_high looks at the body with the others); when not,
	// verifyMsgs are all verify_high says of it.
	verifyReqs bool
	verifyMsgs []string
}

// addFacts gives the bodies in ids that have none their (empty) facts.
// ids must be new: not yet seen by another compile.
func addFacts(ids *omap) {
	for _, id := range ids.keys {
		if b, ok := ids.m[id].(*omap); ok && b.facts == nil {
			b.facts = &bodyFacts{id: id, body: b}
		}
	}
}

// get is f, made, for the body of ID id; nil when f is (no facts kept,
// or a body under another ID).
func (f *bodyFacts) get(id string) *bodyFacts {
	if f == nil || f.id != id {
		return nil
	}
	f.once.Do(f.make)
	return f
}

func (f *bodyFacts) make() {
	f.chunks, f.err = bodyChunks(nil, f.id, f.body)
	for _, state := range f.body.keys {
		if strings.HasPrefix(state, "__") {
			continue
		}
		run, _ := f.body.m[state].([]any)
		for _, arg := range run {
			if a, ok := arg.(map[string]any); ok && len(a) > 0 {
				k := first(a)
				f.reqIn = f.reqIn || reqIn[k]
				f.verifyReqs = f.verifyReqs || k == "require" || k == "watch" || k == "prereq" || k == "onchanges"
			}
		}
	}
	if !f.verifyReqs {
		verifyBody(f.id, f.body, map[string]map[string]string{}, func(msg string) { f.verifyMsgs = append(f.verifyMsgs, msg) })
	}
}
