package pillar

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/state"
)

// Lookups: each question a compile asks the file server about pillar
// files, as a string, so that it can be asked again to see whether the
// answer changed (the stamp scan: the file server answers from its cache
// of each file's path, size, mtime and inode).
//
//	sls\x00<env>\x00<name>  an SLS name's file
//	file\x00<env>\x00<url>  a salt:// file: the top file, a template
//	list\x00<env>\x00       the SLS names of env (globs in the top file
//	                        and in include)
const (
	lkSLS  = "sls"
	lkFile = "file"
	lkList = "list"
)

func lookupKey(kind, env, name string) string { return kind + "\x00" + env + "\x00" + name }

// fileRec is one lookup's answer: the file's path ("" if not found) and
// the SHA-256 of what it held (of the names, for a listing).
type fileRec struct {
	lookup string
	path   string
	sum    [32]byte
}

// looked is a lookup's answer with, for a file, its bytes.
type looked struct {
	rec  fileRec
	rel  string
	src  []byte
	list []string
	err  error
}

// lookState is the last answer to a lookup and when it was asked.
type lookState struct {
	l  *looked
	at time.Time
}

// read answers a lookup for the run, recording it; within a run each
// lookup is asked once.
func (r *run) read(key string) *looked {
	l := r.c.lookupCached(key)
	if _, ok := r.files[key]; !ok {
		r.files[key] = l.rec
	}
	return l
}

// lookupCached answers from the last answer when it is younger than
// the TTL.
func (c *Compiler) lookupCached(key string) *looked {
	c.mu.Lock()
	s := c.looks[key]
	c.mu.Unlock()
	if s != nil && time.Since(s.at) < c.ttl {
		return s.l
	}
	l := c.lookup(key)
	c.mu.Lock()
	if len(c.looks) > 65536 {
		clear(c.looks)
	}
	c.looks[key] = &lookState{l: l, at: time.Now()}
	c.mu.Unlock()
	return l
}

// current is a lookup's answer now (at most the TTL old).
func (c *Compiler) current(key string) fileRec {
	return c.lookupCached(key).rec
}

func (c *Compiler) lookup(key string) *looked {
	kind, rest, _ := strings.Cut(key, "\x00")
	env, name, _ := strings.Cut(rest, "\x00")
	l := &looked{rec: fileRec{lookup: key}}
	switch kind {
	case lkSLS:
		p, err := c.fs.SLSPath(env, name)
		if err != nil {
			if !errors.Is(err, fileserver.ErrNotFound) && !errors.Is(err, fileserver.ErrRefused) {
				l.err = err
			}
			return l
		}
		rel := strings.ReplaceAll(name, ".", "/") + ".sls"
		if !strings.HasSuffix(filepath.ToSlash(p), "/"+rel) {
			rel = strings.ReplaceAll(name, ".", "/") + "/init.sls"
		}
		c.readInto(l, fileserver.CreateURL(rel, ""), env)
	case lkFile:
		c.readInto(l, name, env)
	case lkList:
		files, err := c.fs.List(env, "")
		if err != nil && !errors.Is(err, fileserver.ErrNotFound) {
			l.err = err
			return l
		}
		l.list = slsNames(files)
		l.rec.path = env
		h := sha256.New()
		for _, s := range l.list {
			h.Write([]byte(s + "\x00"))
		}
		h.Sum(l.rec.sum[:0])
	}
	return l
}

func (c *Compiler) readInto(l *looked, u, env string) {
	f, src, err := c.fs.Read(u, env, maxFileBytes)
	switch {
	case errors.Is(err, fileserver.ErrNotFound), errors.Is(err, fileserver.ErrRefused):
		return
	case errors.Is(err, fileserver.ErrTooLarge):
		l.err = fmt.Errorf("%s: %d bytes, more than the %d a pillar file may have", f.Path, f.Size, maxFileBytes)
		l.rec.path = f.Path
		return
	case err != nil:
		l.err = err
		return
	}
	l.rec.path, l.rel, l.src = f.Path, f.Rel, src
	if _, err := hex.Decode(l.rec.sum[:], []byte(f.SHA256)); err != nil {
		l.rec.sum = sha256.Sum256(src)
	}
}

// slsNames are the SLS names of a file listing (salt/fileclient.py
// list_states): a/b.sls and a/b/init.sls as "a.b", sorted.
func slsNames(files []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".sls") {
			continue
		}
		n := strings.TrimSuffix(f, ".sls")
		if strings.HasSuffix(n, "/init") {
			n = strings.TrimSuffix(n, "/init")
		} else if n == "init" {
			continue
		}
		if strings.Contains(n, ".") {
			continue
		}
		n = strings.ReplaceAll(n, "/", ".")
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// loader reads the templates a pillar file includes or imports, from
// pillar_roots: salt://path or path, or ./path and ../path from the
// including file.
type loader struct {
	r   *run
	env string
}

func (l loader) Resolve(from, name string) (string, error) {
	if strings.HasPrefix(name, fileserver.Scheme) && strings.Contains(name, "?saltenv=") {
		return name, nil
	}
	rel := strings.TrimPrefix(name, fileserver.Scheme)
	if strings.HasPrefix(rel, "./") || strings.HasPrefix(rel, "../") {
		fromRel := ""
		if strings.HasPrefix(from, fileserver.Scheme) {
			fromRel, _ = fileserver.ParseURL(from)
		} else {
			for _, f := range l.r.files {
				if f.path == from {
					if lk := l.r.c.lookupCached(f.lookup); lk.rel != "" {
						fromRel = lk.rel
					}
				}
			}
			if fromRel == "" {
				return "", fmt.Errorf("template %s: relative to %s, which is not under pillar_roots", name, from)
			}
		}
		var ok bool
		if rel, ok = fileserver.ResolveRelative(fromRel, rel); !ok {
			return "", fmt.Errorf("template %s: outside pillar_roots", name)
		}
	}
	u := fileserver.CreateURL(rel, l.env)
	t := l.r.read(lookupKey(lkFile, l.env, u))
	if t.err != nil {
		return "", t.err
	}
	if t.rec.path == "" {
		return "", fmt.Errorf("template %s not found in pillarenv '%s'", name, l.env)
	}
	return u, nil
}

func (l loader) Read(u string) ([]byte, error) {
	t := l.r.read(lookupKey(lkFile, l.env, u))
	if t.err != nil {
		return nil, t.err
	}
	if t.rec.path == "" {
		return nil, fmt.Errorf("template %s not found in pillarenv '%s'", u, l.env)
	}
	return t.src, nil
}

// saltFunc gives the salt[] functions a pillar template may call: what
// the master knows of the device (salt/modules/grains.py, pillar.py,
// config.py, match.py, test.py), evaluated on the master.
func (r *run) saltFunc(name string) (render.SaltFunc, string, bool) {
	switch name {
	case "grains.get", "grains.fetch":
		return func(a []any, kw map[string]any) (any, error) { return getPath(r.grains, a, kw) }, "", true
	case "grains.items":
		return func([]any, map[string]any) (any, error) { return r.grains, nil }, "", true
	case "pillar.get", "pillar.fetch":
		return func(a []any, kw map[string]any) (any, error) { return getPath(r.pillarVar, a, kw) }, "", true
	case "pillar.items", "pillar.raw":
		return func([]any, map[string]any) (any, error) { return r.pillarVar, nil }, "", true
	case "config.get", "config.option":
		return func(a []any, kw map[string]any) (any, error) {
			for _, m := range []map[string]any{r.c.opts, r.grains, r.pillarVar} {
				if len(a) > 0 {
					if v, ok := traverse(m, fmt.Sprint(a[0]), ":"); ok {
						return v, nil
					}
				}
			}
			if len(a) > 1 {
				return a[1], nil
			}
			if v, ok := kw["default"]; ok {
				return v, nil
			}
			return "", nil
		}, "", true
	case "test.ping", "test.true":
		return func([]any, map[string]any) (any, error) { return true, nil }, "", true
	}
	if typ, ok := strings.CutPrefix(name, "match."); ok && typ != "" {
		return func(a []any, kw map[string]any) (any, error) {
			if len(a) == 0 {
				return nil, fmt.Errorf("a target is required")
			}
			return r.match(typ, fmt.Sprint(a[0]))
		}, "", true
	}
	return nil, "cannot run at render time on the master: pillar renders on the master, which evaluates only grains.*, pillar.*, config.get, match.* and test.* there", false
}

// getPath is Salt's traverse_dict_and_list with a default.
func getPath(m map[string]any, a []any, kw map[string]any) (any, error) {
	var key string
	switch {
	case len(a) > 0:
		key = fmt.Sprint(a[0])
	case kw["key"] != nil:
		key = fmt.Sprint(kw["key"])
	default:
		return nil, fmt.Errorf("a key is required")
	}
	var def any = ""
	if len(a) > 1 {
		def = a[1]
	} else if v, ok := kw["default"]; ok {
		def = v
	}
	delim := ":"
	if len(a) > 2 {
		delim = fmt.Sprint(a[2])
	} else if v, ok := kw["delimiter"]; ok {
		delim = fmt.Sprint(v)
	}
	if v, ok := traverse(m, key, delim); ok {
		return v, nil
	}
	return def, nil
}

func traverse(m map[string]any, key, delim string) (any, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	var cur any = m
	for _, part := range strings.Split(key, delim) {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[part]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func fnmatch(pat, name string) bool { return state.Fnmatch(name, pat) }
