package statecomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// The compile cache.
//
// A family is the compiles of one request: saltenv, function kind,
// highstate or mods, and the pillar= override. Within a family a compile
// is keyed on the values, for the device, of the family's dependencies
// (deps.go: grains and pillar keys, targets matched, or all of them): two
// devices with equal values render alike, because a template's output is a
// function of the files it reads and of the inputs it names, and the
// dependencies name every input the family's templates can read.
//
// The family's dependencies are learned: each compile returns those of
// the files it read (their static scan) and of the top file's targets.
// When a compile learns one the family did not have, the family's
// dependencies grow and its entries are dropped (they were keyed on
// fewer); this happens in the first compiles of a family, then not again
// until a file changes.
//
// Files: every lookup a compile made (SLS name, template, top file, found
// or not) is recorded with the file's sha256, size and mtime. At the start
// of each Compile call the family's lookups are done again: a name that
// resolves elsewhere, or a file whose size or mtime changed (or whose
// mtime is within racyWindow of when it was hashed) and whose hash
// differs, drops the family.
type family struct {
	key [32]byte

	mu      sync.Mutex
	deps    []string // sorted
	depSet  map[string]bool
	gen     int // increments when deps grow
	entries map[[32]byte]*entry
	files   map[string]fileRec // by lookup
}

// racyWindow: a file changed within it of its hashing may have changed
// again without its mtime moving; it is hashed again.
const racyWindow = 2 * time.Second

func (c *Compiler) family(req Request, k kind, highstate bool) *family {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%v\x00%s\x00", k, highstate, req.Saltenv)
	if !highstate {
		writeCanon(h, toAny(req.Mods))
	}
	writeCanon(h, req.Pillar)
	var key [32]byte
	h.Sum(key[:0])
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.families[key]
	if f == nil {
		if len(c.families) >= maxFamilies {
			clear(c.families)
		}
		f = &family{key: key, depSet: map[string]bool{}, entries: map[[32]byte]*entry{}, files: map[string]fileRec{}}
		c.families[key] = f
	}
	return f
}

// validate checks the family's files and drops its compiles if one changed.
func (f *family) validate(c *Compiler) {
	f.mu.Lock()
	files := make([]fileRec, 0, len(f.files))
	for _, r := range f.files {
		files = append(files, r)
	}
	f.mu.Unlock()
	for _, rec := range files {
		if !c.unchanged(rec) {
			f.mu.Lock()
			f.deps, f.depSet, f.entries, f.files = nil, map[string]bool{}, map[[32]byte]*entry{}, map[string]fileRec{}
			f.gen++
			f.mu.Unlock()
			return
		}
	}
}

func (c *Compiler) unchanged(rec fileRec) bool {
	abs, _ := c.resolve(rec.lookup)
	if abs != rec.abs {
		return false
	}
	if abs == "" {
		return true
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return false
	}
	if fi.Size() == rec.size && fi.ModTime().Equal(rec.mtime) && rec.read.Sub(rec.mtime) > racyWindow {
		return true
	}
	_, now, err := readFile(abs, rec)
	return err == nil && now.sum == rec.sum
}

// get returns device d's compile: cached, or run now (ran true).
func (f *family) get(c *Compiler, req Request, k kind, highstate bool, d *Device, snap *sync.Map) (*entry, bool) {
	dv := c.device(req, d)
	for tries := 0; ; tries++ {
		f.mu.Lock()
		deps, gen := f.deps, f.gen
		f.mu.Unlock()
		key := depKey(c, dv, deps)
		f.mu.Lock()
		if f.gen != gen { // deps grew meanwhile
			f.mu.Unlock()
			continue
		}
		e := f.entries[key]
		if e == nil {
			if len(f.entries) >= maxEntries {
				clear(f.entries)
			}
			e = &entry{}
			f.entries[key] = e
		}
		f.mu.Unlock()
		ran := false
		e.once.Do(func() {
			ran = true
			x := c.compile(req, k, highstate, dv, snap)
			e.state, e.deps, e.files = x.state, x.deps, x.files
		})
		if ran || tries > 2 || subset(e.deps, deps) {
			if ran {
				f.learn(key, gen, e)
			}
			if !ran && !subset(e.deps, deps) {
				// Still learning after retries: compile for this device
				// alone rather than share a compile keyed on too little.
				return c.compile(req, k, highstate, dv, snap), true
			}
			return e, ran
		}
		// e was compiled by a device that agrees with d on deps, but its
		// compile read inputs beyond them: key again on the grown deps.
	}
}

// learn records a new compile's files and dependencies in the family.
func (f *family) learn(key [32]byte, gen int, e *entry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range e.files {
		if _, ok := f.files[r.lookup]; !ok {
			f.files[r.lookup] = r
		}
	}
	grew := false
	for _, d := range e.deps {
		if !f.depSet[d] {
			f.depSet[d] = true
			grew = true
		}
	}
	if !grew {
		return
	}
	f.deps = make([]string, 0, len(f.depSet))
	for d := range f.depSet {
		f.deps = append(f.deps, d)
	}
	sort.Strings(f.deps)
	f.gen++
	// Entries were keyed on fewer deps; start again, keeping nothing that
	// might be found under a key that does not cover what it read.
	f.entries = map[[32]byte]*entry{}
}

func subset(a []string, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j == len(b) || b[j] != x {
			return false
		}
	}
	return true
}

// depKey is device d's key under deps.
func depKey(c *Compiler, d *device, deps []string) [32]byte {
	h := sha256.New()
	for _, dep := range deps {
		h.Write([]byte(dep))
		h.Write([]byte{0})
		switch {
		case dep == "*id":
			h.Write([]byte(d.id))
			h.Write([]byte{0})
			writeCanon(h, d.grains)
			writeCanon(h, d.pillar)
		case dep == "*g":
			writeCanon(h, d.grains)
		case dep == "*p":
			writeCanon(h, d.pillar)
		case strings.HasPrefix(dep, "g:"):
			v, ok := d.grains[dep[2:]]
			writeCanon(h, []any{ok, v})
		case strings.HasPrefix(dep, "p:"):
			v, ok := d.pillar[dep[2:]]
			writeCanon(h, []any{ok, v})
		case strings.HasPrefix(dep, "m:"):
			typ, tgt, _ := strings.Cut(dep[2:], ":")
			ok, err := c.match(d, typ, tgt, "")
			if err != nil {
				h.Write([]byte("error"))
			} else if ok {
				h.Write([]byte{1})
			} else {
				h.Write([]byte{2})
			}
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// writeCanon writes v to h in a form where equal values, and only they,
// write equal bytes: a type byte, lengths, map keys sorted.
func writeCanon(h hash.Hash, v any) { writeCanonDepth(h, v, 0) }

func writeCanonDepth(h hash.Hash, v any, depth int) {
	var n [9]byte
	num := func(t byte, u uint64) {
		n[0] = t
		binary.BigEndian.PutUint64(n[1:], u)
		h.Write(n[:])
	}
	str := func(t byte, s string) {
		num(t, uint64(len(s)))
		h.Write([]byte(s))
	}
	if depth > 64 {
		str('!', "too deep")
		return
	}
	switch v := v.(type) {
	case nil:
		h.Write([]byte{'n'})
	case bool:
		if v {
			h.Write([]byte{'t'})
		} else {
			h.Write([]byte{'f'})
		}
	case string:
		str('s', v)
	case []byte:
		str('b', string(v))
	case int:
		num('i', uint64(v))
	case int64:
		num('i', uint64(v))
	case uint64:
		num('u', v)
	case float64:
		num('d', math.Float64bits(v))
	case []any:
		num('l', uint64(len(v)))
		for _, x := range v {
			writeCanonDepth(h, x, depth+1)
		}
	case []string:
		num('l', uint64(len(v)))
		for _, x := range v {
			str('s', x)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		num('m', uint64(len(v)))
		for _, k := range keys {
			str('s', k)
			writeCanonDepth(h, v[k], depth+1)
		}
	default:
		// Other types (from CBOR decoding: other ints, map[any]any) by
		// their printed form with the type, which is stable.
		var b bytes.Buffer
		fmt.Fprintf(&b, "%T:%v", v, v)
		str('x', b.String())
	}
}
