package statecomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
)

// Lookups: every question a compile asks the file server, as a string, so
// that it can be asked again to see whether the answer changed.
//
//	sls\x00<env>\x00<name>   an SLS name's file (SLSPath, then Read)
//	file\x00<env>\x00<url>   a salt:// file: a template, a top file, a
//	                         source Inline put into a chunk
//	dir\x00<env>\x00<url>    a directory's listing (file.recurse)
//	list\x00<env>            the SLS names of env (globs in include and
//	                         the top file)
const (
	lkSLS  = "sls"
	lkFile = "file"
	lkDir  = "dir"
	lkList = "list"
)

func lookupKey(kind, env, name string) string { return kind + "\x00" + env + "\x00" + name }

// fileRec is one lookup's answer: the file's path on the master's disk
// ("" if not found) and a hash of what it held (for a listing, of the
// names).
type fileRec struct {
	lookup string
	path   string
	sum    [32]byte
}

// looked is a lookup as done once in a Compile call: its record, and for
// a file its bytes and its path relative to its root.
type looked struct {
	rec  fileRec
	rel  string
	src  []byte
	deps []string // a file's: scanDeps of src
	list []string
	err  error
}

// lookup answers a lookup from the file server.
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
		// SLSPath chose a/b.sls or a/b/init.sls: which one is in its path.
		rel := strings.ReplaceAll(name, ".", "/") + ".sls"
		if !strings.HasSuffix(filepath.ToSlash(p), "/"+rel) {
			rel = strings.ReplaceAll(name, ".", "/") + "/init.sls"
		}
		c.readInto(l, fileserver.CreateURL(rel, ""), env)
	case lkFile:
		c.readInto(l, name, env)
	case lkDir:
		files, dirs, err := c.fs.ListDir(name, env)
		if err != nil {
			if !errors.Is(err, fileserver.ErrNotFound) && !errors.Is(err, fileserver.ErrRefused) {
				l.err = err
			}
			return l
		}
		l.rec.path = name
		l.rec.sum = sumLines(files, dirs)
	case lkList:
		files, err := c.fs.List(env, "")
		if err != nil {
			l.err = err
			return l
		}
		l.list = slsNames(files)
		l.rec.path = env
		l.rec.sum = sumLines(l.list)
	}
	return l
}

func (c *Compiler) readInto(l *looked, u, env string) {
	f, src, err := c.fs.Read(u, env, maxFileBytes)
	switch {
	case errors.Is(err, fileserver.ErrNotFound), errors.Is(err, fileserver.ErrRefused):
		return
	case errors.Is(err, fileserver.ErrTooLarge):
		l.err = fmt.Errorf("%s: %d bytes, more than the %d a state file may have", f.Path, f.Size, maxFileBytes)
		l.rec.path, l.rec.sum = f.Path, sumOfHex(f.SHA256)
		return
	case err != nil:
		l.err = err
		return
	}
	l.rec.path, l.rec.sum, l.rel, l.src = f.Path, sumOfHex(f.SHA256), f.Rel, src
	l.deps = c.scan(l.rec.sum, src)
}

// sumOfHex is a file's SHA-256 as the file server gives it (hex), as
// bytes.
func sumOfHex(h string) [32]byte {
	var s [32]byte
	if _, err := hex.Decode(s[:], []byte(h)); err != nil {
		return sha256.Sum256([]byte(h))
	}
	return s
}

func sumLines(lists ...[]string) [32]byte {
	h := sha256.New()
	for _, l := range lists {
		for _, s := range l {
			h.Write([]byte(s))
			h.Write([]byte{0})
		}
		h.Write([]byte{1})
	}
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// slsNames are the SLS names of a file listing: a/b.sls and a/b/init.sls
// as "a.b" (salt/fileclient.py list_states).
func slsNames(files []string) []string {
	var out []string
	seen := map[string]bool{}
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
			continue // a dotted file name is no SLS name
		}
		n = strings.ReplaceAll(n, "/", ".")
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// call is what one Compile call shares between its devices: each lookup
// done once, and each rendering of a file kept by what it read.
type call struct {
	c       *Compiler
	lookups sync.Map    // key -> *looked
	renders sync.Map    // renderKey -> *memoRender
	shapes  sync.Map    // ownKey -> []string: the deps of the templates a rendering read
	tops    sync.Map    // key -> *topMemo
	memo    *state.Memo // the SLS files' own high data, by rendering
}

func (k *call) get(key string) *looked {
	if v, ok := k.lookups.Load(key); ok {
		return v.(*looked)
	}
	l := k.c.lookup(key)
	v, _ := k.lookups.LoadOrStore(key, l)
	return v.(*looked)
}

// run is one compile for one device: package state's Loader over the
// file server, recording what it read and what of the device its
// templates can read.
type run struct {
	c    *Compiler
	call *call
	d    *device
	deps map[string]bool
	// files are the lookups made, by key (the first answer counts).
	files map[string]*looked
	// tpls are the templates read by includes and imports during the
	// rendering in progress.
	tpls []string
	// srcs are the files read, in order, for relative includes (the last
	// read of a path says where it is under its root).
	srcs []*looked
	keys map[depsID][32]byte // depKey by deps
}

func (r *run) read(key string) *looked {
	l := r.call.get(key)
	if _, ok := r.files[key]; !ok {
		r.files[key] = l
		if l.src != nil {
			for _, d := range l.deps {
				r.deps[d] = true
			}
			r.srcs = append(r.srcs, l)
		}
	}
	return l
}

// relOf is the path under its root of the file read at path.
func (r *run) relOf(path string) (string, bool) {
	for i := len(r.srcs) - 1; i >= 0; i-- {
		if r.srcs[i].rec.path == path {
			return r.srcs[i].rel, true
		}
	}
	return "", false
}

// Load is package state's Loader.
func (r *run) Load(env, name string) (string, []sls.Entry, error) {
	l := r.read(lookupKey(lkSLS, env, name))
	if l.err != nil {
		return l.rec.path, nil, l.err
	}
	if l.rec.path == "" {
		return "", nil, fmt.Errorf("No matching sls found for '%s' in env '%s': %w", name, env, state.ErrNotFound)
	}
	entries, _, err := r.render(env, name, l)
	return l.rec.path, entries, err
}

// Envs and List make the Loader a state.Lister: the environments of the
// file roots and the SLS names in one.
func (r *run) Envs() []string { return r.c.fs.Envs() }

func (r *run) List(env string) []string {
	return r.read(lookupKey(lkList, env, "")).list
}

// memoRender is one rendering of a file, kept for the devices of the
// call whose inputs to it are equal. entries are shared: package state
// does not change a Loader's entries.
type memoRender struct {
	entries []sls.Entry
	err     error
	tplDeps []string // deps of the templates it read
	tpls    []string // their lookups
}

// vars are a state file's template variables.
func (r *run) vars(env, sls, rel, abs string) map[string]any {
	v := render.SLSVars(sls, rel, abs)
	v["grains"] = r.d.grains
	v["pillar"] = r.d.pillar
	v["saltenv"] = env
	v["opts"] = r.d.opts(env)
	return v
}

// render renders file l (SLS sls of env, "" for a top file) for the
// device. A rendering is kept for the other devices of the call by the
// file's content and the values, for this device, of what the file and
// the templates it includes can read: a file whose rendering reads no
// per-device input is rendered once per call, whatever the devices'
// grains. key names the rendering (equal keys, equal entries).
func (r *run) render(env, sls string, l *looked) ([]sls.Entry, [32]byte, error) {
	dk := r.depKey(l.deps)
	var arr [256]byte
	buf := arr[:0]
	buf = append(buf, l.rec.sum[:]...)
	buf = append(buf, dk[:]...)
	buf = append(buf, env...)
	buf = append(buf, 0)
	buf = append(buf, sls...)
	buf = append(buf, 0)
	buf = append(buf, l.rec.path...)
	ownKey := sha256.Sum256(buf)
	key := ownKey
	// The templates this file read last time (the same file with the same
	// own inputs reads the same templates): their inputs too.
	if v, ok := r.call.shapes.Load(ownKey); ok {
		sh := v.(*memoRender)
		key = r.fullKey(ownKey, sh)
		if v, ok := r.call.renders.Load(key); ok {
			m := v.(*memoRender)
			for _, t := range m.tpls {
				r.read(t) // record the templates and their deps
			}
			return m.entries, key, m.err
		}
	}
	r.tpls = r.tpls[:0]
	_, entries, err := r.c.r.Render(l.rec.path, l.src, render.Context{
		Vars: r.vars(env, sls, l.rel, l.rec.path), Salt: r.c.saltFor(r.d), Files: tplLoader{r: r, env: env},
	})
	m := &memoRender{entries: entries, err: err, tpls: append([]string(nil), r.tpls...)}
	set := map[string]bool{}
	for _, t := range m.tpls {
		if tl := r.call.get(t); tl.src != nil {
			for _, d := range tl.deps {
				set[d] = true
			}
		}
	}
	for d := range set {
		m.tplDeps = append(m.tplDeps, d)
	}
	sort.Strings(m.tplDeps)
	r.call.shapes.LoadOrStore(ownKey, m)
	key = r.fullKey(ownKey, m)
	r.call.renders.LoadOrStore(key, m)
	return entries, key, err
}

// depsID names a list of deps by its array: the lists a run asks about
// are the scans of its files (kept by content) and their templates'
// (kept by rendering), which nothing changes.
type depsID struct {
	first *string
	n     int
}

// depKey is the device's key under deps, kept for the run: the files of a
// highstate often read the same inputs (the same list, for the same file).
func (r *run) depKey(deps []string) [32]byte {
	if len(deps) == 0 {
		return [32]byte{}
	}
	k := depsID{&deps[0], len(deps)}
	if v, ok := r.keys[k]; ok {
		return v
	}
	v := depKey(r.c, r.d, deps)
	r.keys[k] = v
	return v
}

// fullKey is a rendering's key: the file's own key, the templates it read
// (their contents, fixed for the call) and their inputs' values.
func (r *run) fullKey(own [32]byte, sh *memoRender) [32]byte {
	if len(sh.tpls) == 0 {
		return own
	}
	h := sha256.New()
	h.Write(own[:])
	for _, t := range sh.tpls {
		l := r.call.get(t)
		h.Write([]byte(t))
		h.Write(l.rec.sum[:])
	}
	dk := r.depKey(sh.tplDeps)
	h.Write(dk[:])
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// tplLoader reads the templates a state file includes or imports: by a
// path under the file roots (salt://path or path), or ./path and ../path
// from the including file's directory, as Salt's SaltCacheLoader does.
// Resolved names are salt:// URLs with their saltenv.
type tplLoader struct {
	r   *run
	env string
}

func (l tplLoader) Resolve(from, name string) (string, error) {
	if strings.HasPrefix(name, fileserver.Scheme) && strings.Contains(name, "?saltenv=") {
		return name, nil // resolved already
	}
	rel := strings.TrimPrefix(name, fileserver.Scheme)
	if strings.HasPrefix(rel, "./") || strings.HasPrefix(rel, "../") {
		fromRel := ""
		if strings.HasPrefix(from, fileserver.Scheme) {
			fromRel, _ = fileserver.ParseURL(from)
		} else if rel, ok := l.r.relOf(from); ok {
			fromRel = rel
		} else {
			return "", fmt.Errorf("template %s: relative to %s, which is not on the file server", name, from)
		}
		var ok bool
		if rel, ok = fileserver.ResolveRelative(fromRel, rel); !ok {
			return "", fmt.Errorf("template %s: outside the file roots", name)
		}
	}
	u := fileserver.CreateURL(rel, l.env)
	key := lookupKey(lkFile, l.env, u)
	l.r.tpls = append(l.r.tpls, key)
	t := l.r.read(key)
	if t.err != nil {
		return "", t.err
	}
	if t.rec.path == "" {
		return "", fmt.Errorf("template %s not found in saltenv '%s'", name, l.env)
	}
	return u, nil
}

func (l tplLoader) Read(u string) ([]byte, error) {
	t := l.r.read(lookupKey(lkFile, l.env, u))
	if t.err != nil {
		return nil, t.err
	}
	if t.rec.path == "" {
		return nil, fmt.Errorf("template %s not found in saltenv '%s'", u, l.env)
	}
	return t.src, nil
}

// renderSource renders a `template: jinja` source for the device, for
// fileserver.Inline: the device's variables, then ctx (the state's name,
// source, defaults and context) over them.
func (r *run) renderSource(env string) fileserver.TemplateFunc {
	return func(path string, src []byte, ctx map[string]any) ([]byte, error) {
		for d := range scanSet(r.c.scan(sha256.Sum256(src), src)) {
			r.deps[d] = true
		}
		senv := env
		if s, ok := ctx["saltenv"].(string); ok && s != "" {
			senv = s
		}
		rel := ""
		name := path
		if u, ok := ctx["source"].(string); ok {
			rel, _ = fileserver.ParseURL(u)
			name = u
		}
		if path == "" {
			name = "<contents>"
		}
		v := r.vars(senv, "", rel, path)
		for k, x := range ctx {
			v[k] = x
		}
		r.tpls = r.tpls[:0]
		text, err := r.c.r.RenderText(name, src, render.Context{Vars: v, Salt: r.c.saltFor(r.d), Files: tplLoader{r: r, env: senv}})
		if err != nil {
			return nil, err
		}
		// Jinja drops the template's last newline; Salt puts it back
		// (salt/utils/templates.py render_jinja_tmpl).
		if bytes.HasSuffix(src, []byte("\n")) {
			text += "\n"
		}
		return []byte(text), nil
	}
}

// recordInlined records, as lookups of the compile, the salt:// files and
// directories Inline put into (or found missing for) the chunks: a change
// to one of them drops the compile.
func (r *run) recordInlined(low []state.Chunk, env string) {
	for _, ch := range low {
		cenv := ch.Env()
		if cenv == "" {
			cenv = env
		}
		var urls []string
		if m, ok := ch[fileserver.KeyFiles].(map[string]any); ok {
			for u := range m {
				urls = append(urls, u)
			}
		}
		if m, ok := ch[fileserver.KeyErrors].(map[string]any); ok {
			for u := range m {
				if u != "contents" {
					urls = append(urls, u)
				}
			}
		}
		for _, k := range []string{fileserver.KeyMissing, fileserver.KeyTooLarge} {
			if l, ok := ch[k].([]string); ok {
				urls = append(urls, l...)
			}
		}
		for _, u := range urls {
			r.read(lookupKey(lkFile, cenv, u))
		}
		if l, ok := ch[fileserver.KeyDirs].([]string); ok && len(l) > 0 {
			r.read(lookupKey(lkDir, cenv, l[0]))
		}
	}
}

func scanSet(d []string) map[string]bool {
	m := make(map[string]bool, len(d))
	for _, x := range d {
		m[x] = true
	}
	return m
}
