package statecomp

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/halite-fleet/halite/state"
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
// Files: every lookup a compile made through the file server (SLS name,
// template, top file, the salt:// sources and directories Inline put into
// chunks, the SLS names of an env; found or not) is recorded with the
// path it resolved to and the SHA-256 of what it held. At the start of
// each Compile call the family's lookups are done again, through the
// file server (which trusts a lookup for fileserver.LookupTTL and hashes
// a file again when its size, mtime or inode changed): a name that
// resolves elsewhere, or a hash that differs, drops the family.
type family struct {
	key [32]byte

	mu      sync.Mutex
	deps    []string // sorted
	depSet  map[string]bool
	gen     int // increments when deps grow
	entries map[[32]byte]*entry
	files   map[string]fileRec // by lookup
}

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

// validate checks the family's files and drops its compiles if one
// changed; the answers are kept in cl for the call's compiles.
func (f *family) validate(cl *call) {
	f.mu.Lock()
	files := make([]fileRec, 0, len(f.files))
	for _, r := range f.files {
		files = append(files, r)
	}
	f.mu.Unlock()
	for _, rec := range files {
		if l := cl.get(rec.lookup); l.rec != rec {
			f.mu.Lock()
			f.deps, f.depSet, f.entries, f.files = nil, map[string]bool{}, map[[32]byte]*entry{}, map[string]fileRec{}
			f.gen++
			f.mu.Unlock()
			return
		}
	}
}

// get returns device d's compile: cached, or run now (ran true).
func (f *family) get(c *Compiler, req Request, k kind, highstate bool, d *Device, cl *call) (*entry, bool) {
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
			x := c.compile(req, k, highstate, dv, cl)
			e.state, e.sum, e.deps, e.files = x.state, x.sum, x.deps, x.files
			// Learned before the devices waiting on e see it: they
			// key again on the grown deps rather than retry on the old.
			f.learn(c, dv, e)
		})
		if ran || tries > 2 || subset(e.deps, deps) {
			if !ran && !subset(e.deps, deps) {
				// Still learning after retries: compile for this device
				// alone rather than share a compile keyed on too little.
				return c.compile(req, k, highstate, dv, cl), true
			}
			return e, ran
		}
		// e was compiled by a device that agrees with d on deps, but its
		// compile read inputs beyond them: key again on the grown deps.
	}
}

// learn records a new compile's files and dependencies in the family.
func (f *family) learn(c *Compiler, dv *device, e *entry) {
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
	// might be found under a key that does not cover what it read, but
	// this compile, under its device's key on all the deps (which cover
	// its own).
	f.entries = map[[32]byte]*entry{depKey(c, dv, f.deps): e}
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
	if len(deps) == 0 {
		return [32]byte{}
	}
	b := canonPool.Get().(*[]byte)
	buf := (*b)[:0]
	for _, dep := range deps {
		buf = append(buf, dep...)
		buf = append(buf, 0)
		switch {
		case dep == "*id":
			buf = append(buf, d.id...)
			buf = append(buf, 0)
			buf = appendCanon(buf, d.grains, 0)
			buf = appendCanon(buf, d.pillar, 0)
		case dep == "*g":
			buf = appendCanon(buf, d.grains, 0)
		case dep == "*p":
			buf = appendCanon(buf, d.pillar, 0)
		case strings.HasPrefix(dep, "g:"):
			v, ok := d.grains[dep[2:]]
			buf = appendPresent(buf, v, ok)
		case strings.HasPrefix(dep, "p:"):
			v, ok := d.pillar[dep[2:]]
			buf = appendPresent(buf, v, ok)
		case strings.HasPrefix(dep, "m:"):
			typ, tgt, _ := strings.Cut(dep[2:], ":")
			ok, err := c.match(d, typ, tgt, "")
			switch {
			case err != nil:
				buf = append(buf, 'e')
			case ok:
				buf = append(buf, 1)
			default:
				buf = append(buf, 2)
			}
		}
	}
	k := sha256.Sum256(buf)
	*b = buf
	canonPool.Put(b)
	return k
}

func appendPresent(buf []byte, v any, ok bool) []byte {
	if !ok {
		return append(buf, '-')
	}
	return appendCanon(append(buf, '+'), v, 0)
}

var canonPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// canonSum is the SHA-256 of v's canonical form: equal values, and only
// they, have equal sums.
func canonSum(v any) [32]byte {
	b := canonPool.Get().(*[]byte)
	buf := appendCanon((*b)[:0], v, 0)
	k := sha256.Sum256(buf)
	if cap(buf) <= 1<<20 {
		*b = buf
		canonPool.Put(b)
	}
	return k
}

// writeCanon writes v's canonical form to h.
func writeCanon(h hash.Hash, v any) { h.Write(appendCanon(nil, v, 0)) }

// appendCanon appends v in a form where equal values, and only they,
// write equal bytes: a type byte, lengths, map keys sorted. A file that
// Inline put into a chunk ({"data": bytes, "sha256": hex}) is written as
// its hash, not its bytes.
func appendCanon(buf []byte, v any, depth int) []byte {
	if depth > 64 {
		return canonStr(buf, '!', "too deep")
	}
	switch v := v.(type) {
	case nil:
		buf = append(buf, 'n')
	case bool:
		if v {
			buf = append(buf, 't')
		} else {
			buf = append(buf, 'f')
		}
	case string:
		buf = canonStr(buf, 's', v)
	case []byte:
		buf = canonStr(buf, 'b', string(v))
	case int:
		buf = canonNum(buf, 'i', uint64(v))
	case int64:
		buf = canonNum(buf, 'i', uint64(v))
	case uint64:
		buf = canonNum(buf, 'u', v)
	case float64:
		buf = canonNum(buf, 'd', math.Float64bits(v))
	case []any:
		buf = canonNum(buf, 'l', uint64(len(v)))
		for _, x := range v {
			buf = appendCanon(buf, x, depth+1)
		}
	case []string:
		buf = canonNum(buf, 'l', uint64(len(v)))
		for _, x := range v {
			buf = canonStr(buf, 's', x)
		}
	case map[string]any:
		if len(v) == 2 {
			if _, ok := v["data"].([]byte); ok {
				if sum, ok := v["sha256"].(string); ok {
					buf = canonStr(buf, 'h', sum)
					return buf
				}
			}
		}
		var arr [16]string
		keys := arr[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf = canonNum(buf, 'm', uint64(len(v)))
		for _, k := range keys {
			buf = canonStr(buf, 's', k)
			buf = appendCanon(buf, v[k], depth+1)
		}
	case state.Chunk:
		buf = appendCanon(buf, map[string]any(v), depth)
	default:
		// Other types (from CBOR decoding: other ints, map[any]any) by
		// their printed form with the type, which is stable.
		buf = canonStr(buf, 'x', fmt.Sprintf("%T:%v", v, v))
	}
	return buf
}

func canonNum(buf []byte, t byte, u uint64) []byte {
	return binary.BigEndian.AppendUint64(append(buf, t), u)
}

func canonStr(buf []byte, t byte, s string) []byte {
	return append(canonNum(buf, t, uint64(len(s))), s...)
}
