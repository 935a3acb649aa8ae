package statecomp

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
	"github.com/halite-fleet/halite/targets"
)

// Limits of the work one request may cost the master.
const (
	// maxFileBytes is the largest SLS, top or template file read.
	maxFileBytes = 4 << 20
	// maxEntries is how many distinct compiles one request family keeps;
	// beyond it the family's cache starts again.
	maxEntries = 50000
	// maxFamilies is how many request families are cached at once.
	maxFamilies = 256
	// DefaultTimeout bounds one Compile call; devices not compiled by
	// then get an error.
	DefaultTimeout = 2 * time.Minute
)

// Options configure a Compiler.
type Options struct {
	// FileRoots is the master's file_roots: saltenv to directories.
	FileRoots map[string][]string
	// Pillar is the device's pillar; nil: empty (issue 18 fills it).
	Pillar func(id string) map[string]any
	// Opts is the master's config, for config.get.
	Opts map[string]any
	// Nodegroups is the master's nodegroups, for match.compound and top
	// files that match N@.
	Nodegroups map[string]any
	// Inline fills the chunks' salt:// sources (master/fileserver.Inline);
	// render renders a `template: jinja` source for the device. nil:
	// sources are not inlined.
	Inline func(low []state.Chunk, env string, render func(url string, src []byte) ([]byte, error)) error
}

// Compiler compiles states for devices, with a cache. Safe for
// concurrent use.
type Compiler struct {
	roots      roots
	pillarFn   func(string) map[string]any
	opts       map[string]any
	nodegroups map[string]any
	inline     func([]state.Chunk, string, func(string, []byte) ([]byte, error)) error
	r          *render.Renderer

	mu       sync.Mutex
	matchers map[string]*targets.Matcher
	families map[[32]byte]*family
	scans    map[[32]byte][]string // static deps by file content
}

// New returns a Compiler.
func New(o Options) *Compiler {
	return &Compiler{
		roots: roots(o.FileRoots), pillarFn: o.Pillar, opts: o.Opts, nodegroups: o.Nodegroups,
		inline: o.Inline, r: render.New(render.Options{}),
		matchers: map[string]*targets.Matcher{}, families: map[[32]byte]*family{},
		scans: map[[32]byte][]string{},
	}
}

// Device is what the master knows of a device to compile for.
type Device struct {
	ID     string
	Grains map[string]any
	Index  *targets.Grains // the grains' index, if the caller has one
}

// Request is one state job's compile request.
type Request struct {
	Fun     string         // state.apply, state.sls, state.highstate, state.show_*, state.test
	Mods    []string       // SLS names; none: the highstate
	Saltenv string         // "": base (highstate: every environment of the top files)
	Pillar  map[string]any // the job's pillar= override, merged over each device's pillar
	Test    any            // test= of the job: nil when not given
	Timeout time.Duration  // 0: DefaultTimeout
}

// Result is one device's compile: its __state__ (shared by the devices
// of its variant; read only) and Sum, equal for equal States.
type Result struct {
	State map[string]any
	Sum   [32]byte
}

// Stats tell what a Compile call cost.
type Stats struct {
	Devices  int
	Compiled int // compiles run (cache misses)
	Variants int // distinct results
	Took     time.Duration
}

// kind is what a state function asks the compiler for.
type kind int

const (
	kindApply kind = iota // low state to run
	kindTop               // state.show_top
	kindHigh              // state.show_highstate, state.show_sls
	kindLow               // state.show_lowstate, state.show_low_sls
)

// Compiles reports whether fun is a state function the master compiles
// for (state.single, state.running and the others need nothing compiled).
func Compiles(fun string) bool {
	_, _, ok := funKind(fun, nil)
	return ok
}

func funKind(fun string, mods []string) (k kind, highstate bool, ok bool) {
	switch fun {
	case "state.apply", "state.test":
		return kindApply, len(mods) == 0, true
	case "state.highstate":
		return kindApply, true, true
	case "state.sls":
		return kindApply, false, true
	case "state.show_top":
		return kindTop, true, true
	case "state.show_highstate":
		return kindHigh, true, true
	case "state.show_sls":
		return kindHigh, false, true
	case "state.show_lowstate":
		return kindLow, true, true
	case "state.show_low_sls":
		return kindLow, false, true
	}
	return 0, false, false
}

// Compile compiles req for every device, in parallel; results[i] is
// devs[i]'s. Devices with equal inputs share one compile and one Result.
// A device whose compile fails gets a Result with errors; the others go on.
func (c *Compiler) Compile(req Request, devs []Device) ([]*Result, Stats) {
	start := time.Now()
	k, highstate, _ := funKind(req.Fun, req.Mods)
	if req.Saltenv == "" && !highstate {
		req.Saltenv = "base"
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := start.Add(timeout)
	fam := c.family(req, k, highstate)
	fam.validate(c)
	snap := &sync.Map{}

	results := make([]*Result, len(devs))
	perReq := map[*entry]*Result{}
	var perMu sync.Mutex
	var compiled atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(1, len(devs)))
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(devs) {
					return
				}
				var e *entry
				if time.Now().After(deadline) {
					e = errEntry(fmt.Sprintf("state compile on the master timed out after %s", timeout))
				} else {
					var ran bool
					e, ran = fam.get(c, req, k, highstate, &devs[i], snap)
					if ran {
						compiled.Add(1)
					}
				}
				perMu.Lock()
				r := perReq[e]
				if r == nil {
					r = e.forRequest(req)
					perReq[e] = r
				}
				perMu.Unlock()
				results[i] = r
			}
		}()
	}
	wg.Wait()
	sums := map[[32]byte]bool{}
	for _, r := range perReq {
		sums[r.Sum] = true
	}
	return results, Stats{Devices: len(devs), Compiled: int(compiled.Load()), Variants: len(sums), Took: time.Since(start)}
}

// entry is one cached compile.
type entry struct {
	once  sync.Once
	state map[string]any // __state__ without test
	deps  []string       // dependencies learned by the compile
	files []fileRec
}

func errEntry(msg string) *entry {
	e := &entry{state: map[string]any{"low": []any{}, "errors": []any{msg}}}
	e.once.Do(func() {})
	return e
}

// forRequest is the entry's Result for req: its state with "test" and its
// sum.
func (e *entry) forRequest(req Request) *Result {
	st := make(map[string]any, len(e.state)+1)
	for k, v := range e.state {
		st[k] = v
	}
	if req.Test != nil {
		st["test"] = truthy(req.Test)
	}
	h := sha256.New()
	writeCanon(h, st)
	var r Result
	r.State = st
	h.Sum(r.Sum[:0])
	return &r
}

func truthy(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		switch strings.ToLower(v) {
		case "true", "yes", "on", "1":
			return true
		}
	case int:
		return v != 0
	case float64:
		return v != 0
	}
	return false
}

// device is a device's inputs during a compile.
type device struct {
	id             string
	grains, pillar map[string]any
	index          *targets.Grains
}

func (c *Compiler) device(req Request, d *Device) *device {
	var p map[string]any
	if c.pillarFn != nil {
		p = c.pillarFn(d.ID)
	}
	if len(req.Pillar) > 0 {
		p = merge(p, req.Pillar, 0)
	}
	if p == nil {
		p = map[string]any{}
	}
	g := d.Grains
	if g == nil {
		g = map[string]any{}
	}
	return &device{id: d.ID, grains: g, pillar: p, index: d.Index}
}

// merge is Salt's recursive dict merge: b over a (salt/utils/dictupdate.py
// update).
func merge(a, b map[string]any, depth int) map[string]any {
	out := make(map[string]any, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		bm, ok1 := v.(map[string]any)
		am, ok2 := out[k].(map[string]any)
		if ok1 && ok2 && depth < 32 {
			out[k] = merge(am, bm, depth+1)
			continue
		}
		out[k] = v
	}
	return out
}

// run is one compile for one device: it renders through the cache's
// Loader and records what it read.
type run struct {
	c     *Compiler
	d     *device
	deps  map[string]bool
	files []fileRec
	snap  *sync.Map // lookup -> snapFile: files read during this Compile call
	tpls  int       // templates read through tplLoader
}

// snapFile is a file as read once in a Compile call (validate checked the
// family's files at its start).
type snapFile struct {
	abs, rel string
	src      []byte
	rec      fileRec
}

// fileRec is one file lookup of a compile: what name resolved to, and
// what the file held.
type fileRec struct {
	lookup string // "sls:<env>:<name>", "file:<env>:<rel>", "top:<env>"
	abs    string // "" if not found
	sum    [32]byte
	size   int64
	mtime  time.Time
	read   time.Time // when it was hashed
}

func (c *Compiler) resolve(lookup string) (abs, rel string) {
	kind, rest, _ := strings.Cut(lookup, ":")
	env, name, _ := strings.Cut(rest, ":")
	switch kind {
	case "sls":
		return c.roots.slsPath(env, name)
	case "top":
		return c.roots.filePath(env, "top.sls"), "top.sls"
	}
	return c.roots.filePath(env, name), name
}

// read resolves and reads lookup's file, recording it and its
// dependencies.
func (r *run) read(lookup string) (abs, rel string, src []byte, err error) {
	if r.snap != nil {
		if v, ok := r.snap.Load(lookup); ok {
			f := v.(*snapFile)
			r.files = append(r.files, f.rec)
			if f.abs != "" {
				for _, d := range r.c.scan(f.rec.sum, f.src) {
					r.deps[d] = true
				}
			}
			return f.abs, f.rel, f.src, nil
		}
		defer func() {
			if err == nil {
				r.snap.Store(lookup, &snapFile{abs: abs, rel: rel, src: src, rec: r.files[len(r.files)-1]})
			}
		}()
	}
	abs, rel = r.c.resolve(lookup)
	rec := fileRec{lookup: lookup, abs: abs}
	if abs == "" {
		r.files = append(r.files, rec)
		return "", rel, nil, nil
	}
	if src, rec, err = readFile(abs, rec); err != nil {
		return "", rel, nil, err
	}
	r.files = append(r.files, rec)
	for _, d := range r.c.scan(rec.sum, src) {
		r.deps[d] = true
	}
	return abs, rel, src, nil
}

func readFile(abs string, rec fileRec) ([]byte, fileRec, error) {
	f, err := os.Open(abs)
	if err != nil {
		return nil, rec, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, rec, err
	}
	if fi.Size() > maxFileBytes {
		return nil, rec, fmt.Errorf("%s: %d bytes, more than the %d a state file may have", abs, fi.Size(), maxFileBytes)
	}
	src := make([]byte, fi.Size())
	if _, err := f.ReadAt(src, 0); err != nil && fi.Size() > 0 {
		return nil, rec, err
	}
	rec.sum, rec.size, rec.mtime, rec.read = sha256.Sum256(src), fi.Size(), fi.ModTime(), time.Now()
	return src, rec, nil
}

func (c *Compiler) scan(sum [32]byte, src []byte) []string {
	c.mu.Lock()
	d, ok := c.scans[sum]
	c.mu.Unlock()
	if ok {
		return d
	}
	d = scanDeps(string(src))
	c.mu.Lock()
	if len(c.scans) > 8192 {
		clear(c.scans)
	}
	c.scans[sum] = d
	c.mu.Unlock()
	return d
}

// vars are a state file's template variables.
func (r *run) vars(env, sls, rel, abs string) map[string]any {
	v := render.SLSVars(sls, rel, abs)
	v["grains"] = r.d.grains
	v["pillar"] = r.d.pillar
	v["saltenv"] = env
	v["opts"] = map[string]any{"id": r.d.id, "saltenv": env, "grains": r.d.grains, "pillar": r.d.pillar, "file_client": "remote"}
	return v
}

// render renders one file of env for the device.
// A file whose rendering read no other template is kept, by its content
// and the values of its own dependencies, for the other devices of the
// call (fileMemo); its entries are copied out, since the state compiler
// may change them.
func (r *run) render(env, sls, rel, abs string, src []byte) ([]sls.Entry, error) {
	var key [32]byte
	if r.snap != nil {
		h := sha256.New()
		sum := sha256.Sum256(src)
		h.Write(sum[:])
		fmt.Fprintf(h, "\x00%s\x00%s\x00%s\x00", env, sls, abs)
		key = depKey(r.c, r.d, r.c.scan(sum, src))
		h.Write(key[:])
		h.Sum(key[:0])
		if v, ok := r.snap.Load(key); ok {
			m := v.(*memoRender)
			return copyEntries(m.entries), m.err
		}
	}
	tpls := r.tpls
	_, entries, err := r.c.r.Render(abs, src, render.Context{
		Vars: r.vars(env, sls, rel, abs), Salt: r.c.saltFor(r.d), Files: tplLoader{r: r, env: env},
	})
	if r.snap != nil && r.tpls == tpls {
		r.snap.Store(key, &memoRender{entries: copyEntries(entries), err: err})
	}
	return entries, err
}

type memoRender struct {
	entries []sls.Entry
	err     error
}

func copyEntries(es []sls.Entry) []sls.Entry {
	if es == nil {
		return nil
	}
	out := make([]sls.Entry, len(es))
	for i, e := range es {
		out[i] = sls.Entry{ID: e.ID, Line: e.Line, Value: deepCopy(e.Value, 0)}
	}
	return out
}

func deepCopy(v any, depth int) any {
	if depth > 64 {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x, depth+1)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = deepCopy(x, depth+1)
		}
		return l
	}
	return v
}

// Load is package state's Loader over the file roots.
func (r *run) Load(env, name string) (string, []sls.Entry, error) {
	abs, rel, src, err := r.read("sls:" + env + ":" + name)
	if err != nil {
		return "", nil, fmt.Errorf("Rendering SLS '%s:%s' failed: %w", env, name, err)
	}
	if abs == "" {
		return "", nil, fmt.Errorf("No matching sls found for '%s' in env '%s'", name, env)
	}
	entries, err := r.render(env, name, rel, abs, src)
	if err != nil {
		return rel, nil, fmt.Errorf("Rendering SLS '%s:%s' failed: %w", env, name, err)
	}
	return rel, entries, nil
}

// tplLoader reads the templates a state file includes or imports: by a
// path under the file roots (salt://path or path), or ./path and ../path
// from the including file's directory, as Salt's SaltCacheLoader does.
type tplLoader struct {
	r   *run
	env string
}

func (l tplLoader) Resolve(from, name string) (string, error) {
	l.r.tpls++
	if strings.HasPrefix(name, "/") {
		if _, err := l.r.c.roots.relOf(l.env, name); err == nil {
			return name, nil
		}
	}
	rel := strings.TrimPrefix(name, "salt://")
	if strings.HasPrefix(rel, "./") || strings.HasPrefix(rel, "../") {
		fromRel, err := l.r.c.roots.relOf(l.env, from)
		if err != nil {
			return "", err
		}
		dir := ""
		if i := strings.LastIndexByte(fromRel, '/'); i >= 0 {
			dir = fromRel[:i]
		}
		parts := strings.Split(dir, "/")
		if dir == "" {
			parts = nil
		}
		for _, p := range strings.Split(rel, "/") {
			switch p {
			case ".", "":
			case "..":
				if len(parts) == 0 {
					return "", fmt.Errorf("template %s: outside the file roots", name)
				}
				parts = parts[:len(parts)-1]
			default:
				parts = append(parts, p)
			}
		}
		rel = strings.Join(parts, "/")
	}
	abs, _, _, err := l.r.read("file:" + l.env + ":" + rel)
	if err != nil {
		return "", err
	}
	if abs == "" {
		return "", fmt.Errorf("template %s not found in saltenv '%s'", name, l.env)
	}
	return abs, nil
}

func (l tplLoader) Read(abs string) ([]byte, error) {
	rel, err := l.r.c.roots.relOf(l.env, abs)
	if err != nil {
		return nil, err
	}
	_, _, src, err := l.r.read("file:" + l.env + ":" + rel)
	return src, err
}

// compile runs one device's compile.
func (c *Compiler) compile(req Request, k kind, highstate bool, d *device, snap *sync.Map) *entry {
	r := &run{c: c, d: d, deps: map[string]bool{}, snap: snap}
	st := map[string]any{"saltenv": req.Saltenv, "mods": toAny(req.Mods)}
	var errs []string
	envMods := map[string][]string{}
	var envs []string
	if highstate {
		top, topErrs := r.top(req.Saltenv)
		errs = append(errs, topErrs...)
		for env, mods := range top {
			envs = append(envs, env)
			envMods[env] = mods
		}
		sort.Slice(envs, func(i, j int) bool { return envs[i] == "base" || envs[i] < envs[j] && envs[j] != "base" })
		if k == kindTop {
			t := map[string]any{}
			for env, mods := range top {
				t[env] = toAny(mods)
			}
			st["top"] = t
		}
		if len(top) == 0 && len(errs) == 0 {
			errs = append(errs, "No Top file or master_tops data matches found. Please see master log for details.")
		}
	} else {
		envs = []string{req.Saltenv}
		envMods[req.Saltenv] = req.Mods
	}
	var low []state.Chunk
	high := map[string]any{}
	if k != kindTop {
		for _, env := range envs {
			h, l, e := stateCompile(r, env, envMods[env])
			for id, v := range h {
				high[id] = v
			}
			low = append(low, l...)
			errs = append(errs, e...)
		}
		if len(errs) == 0 {
			low = stateOrder(low)
			errs = append(errs, stateCheck(low)...)
		}
		if len(errs) == 0 && c.inline != nil && k == kindApply {
			if err := c.inline(low, req.Saltenv, r.renderSource); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	switch k {
	case kindHigh:
		st["high"] = high
	}
	if k != kindTop {
		l := make([]any, len(low))
		for i, ch := range low {
			l[i] = map[string]any(ch)
		}
		st["low"] = l
	}
	if len(errs) > 0 {
		st["errors"] = toAny(errs)
		st["low"] = []any{}
	}
	deps := make([]string, 0, len(r.deps))
	for d := range r.deps {
		deps = append(deps, d)
	}
	sort.Strings(deps)
	return &entry{state: st, deps: deps, files: r.files}
}

// renderSource renders a `template: jinja` source (salt://url) for
// the device, for Inline.
func (r *run) renderSource(url string, src []byte) ([]byte, error) {
	rel := strings.TrimPrefix(url, "salt://")
	rel, _, _ = strings.Cut(rel, "?")
	for d := range scanSet(r.c.scan(sha256.Sum256(src), src)) {
		r.deps[d] = true
	}
	env := "base"
	for e := range r.c.roots {
		if r.c.roots.filePath(e, rel) != "" {
			env = e
			break
		}
	}
	text, err := r.c.r.RenderText(url, src, render.Context{
		Vars: r.vars(env, "", rel, url), Salt: r.c.saltFor(r.d), Files: tplLoader{r: r, env: env},
	})
	return []byte(text), err
}

func scanSet(d []string) map[string]bool {
	m := make(map[string]bool, len(d))
	for _, x := range d {
		m[x] = true
	}
	return m
}

// top renders the top files and returns the SLS names that match the
// device, by saltenv (Salt's State.get_tops and top_matches in
// salt/state.py; the merging strategy is Salt's default, merge: each
// environment's SLS from the top file of its own name first, then base's).
func (r *run) top(saltenv string) (map[string][]string, []string) {
	envs := make([]string, 0, len(r.c.roots))
	for env := range r.c.roots {
		if saltenv == "" || env == saltenv {
			envs = append(envs, env)
		}
	}
	sort.Strings(envs)
	out := map[string][]string{}
	seen := map[string]bool{}
	var errs []string
	for _, topEnv := range envs {
		abs, rel, src, err := r.read("top:" + topEnv)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if abs == "" {
			continue
		}
		entries, err := r.render(topEnv, "top", rel, abs, src)
		if err != nil {
			errs = append(errs, fmt.Sprintf("Rendering Primary Top file failed, render error: %v", err))
			continue
		}
		for _, e := range entries {
			env := e.ID
			if saltenv != "" && env != saltenv {
				continue
			}
			tgts, ok := e.Value.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Sprintf("Top file %s: environment %s is not a dictionary of targets", rel, env))
				continue
			}
			// Targets in the order written: the entries of a mapping
			// decode as a map; sort for a stable order (Salt keeps the
			// YAML order; the SLS order within a target is kept).
			names := make([]string, 0, len(tgts))
			for t := range tgts {
				names = append(names, t)
			}
			sort.Strings(names)
			for _, tgt := range names {
				list, ok := tgts[tgt].([]any)
				if !ok {
					errs = append(errs, fmt.Sprintf("Top file %s: target %q in environment %s is not a list", rel, tgt, env))
					continue
				}
				tgtType := "glob"
				var mods []string
				for _, x := range list {
					switch x := x.(type) {
					case string:
						mods = append(mods, x)
					case map[string]any:
						if m, ok := x["match"].(string); ok {
							tgtType = m
						}
					}
				}
				r.deps["m:"+tgtType+":"+tgt] = true
				ok, err := r.c.match(r.d, tgtType, tgt, "")
				if err != nil {
					errs = append(errs, fmt.Sprintf("Top file %s: target %q: %v", rel, tgt, err))
					continue
				}
				if !ok {
					continue
				}
				for _, m := range mods {
					if !seen[env+":"+m] {
						seen[env+":"+m] = true
						out[env] = append(out[env], m)
					}
				}
			}
		}
	}
	return out, errs
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
