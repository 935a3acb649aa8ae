package pillar

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/render"
	"github.com/halite-fleet/halite/render/sls"
	"github.com/halite-fleet/halite/state"
	"github.com/halite-fleet/halite/targets"
)

// Limits of the work one device's compile may cost the master.
const (
	// maxFileBytes is the largest pillar SLS or top file read.
	maxFileBytes = 4 << 20
	// maxSLS is how many SLS files one compile renders.
	maxSLS = 4096
)

// Options configure a Compiler: the master's pillar options.
type Options struct {
	// Roots are pillar_roots: environment -> directories.
	Roots map[string][]string
	// Pillarenv, when set, is the only environment whose top file and
	// SLS are read.
	Pillarenv string
	// Strategy is pillar_source_merging_strategy ("" is smart).
	Strategy string
	// MergeLists is pillar_merge_lists.
	MergeLists bool
	// ExtPillar is ext_pillar: a list of one-key mappings {name: config}.
	ExtPillar []any
	// ExtPillarFirst is ext_pillar_first: the external pillars are
	// compiled first, and the SLS see them as pillar.
	ExtPillarFirst bool
	// IncludesOverrideSLS is pillar_includes_override_sls.
	IncludesOverrideSLS bool
	// RenderErrorDetail is pillar_safe_render_error false: a rendering
	// error's text (file, line, reason) goes into _errors, not only into
	// the master's log.
	RenderErrorDetail bool
	// StateTop is the top file's name ("" is top.sls).
	StateTop string
	// CacheTTL is how long a device's compiled pillar is kept before the
	// next need compiles it again (pillar_cache_ttl); 0: until a change.
	CacheTTL time.Duration
	// Nodegroups are the master's, for N@ and file_tree's nodegroups/.
	Nodegroups map[string]any
	// Opts are the master's options as loaded (postgres, config.get).
	Opts map[string]any
	// Grains gives a device's grains as the master holds them (nil: none).
	// A different map than the one a kept pillar was compiled with makes
	// the next need compile it again.
	Grains func(id string) map[string]any
	Log    *zap.Logger
	// LookupTTL is how long an answer about a pillar file is trusted
	// (0: fileserver.LookupTTL; below 0: not at all, for tests).
	LookupTTL time.Duration
}

// Compiler compiles and keeps each device's pillar. Safe for concurrent
// use. The maps it gives are shared and must not be modified.
type Compiler struct {
	o          Options
	roots      map[string][]string
	pillarenv  string
	strategy   string
	nodegroups map[string]any
	opts       map[string]any
	topName    string
	log        *zap.Logger
	fs         *fileserver.Server
	r          *render.Renderer
	ttl        time.Duration

	mu       sync.Mutex
	devices  map[string]*kept
	looks    map[string]*lookState
	statics  map[[32]byte]*staticRender
	matchers map[string]*targets.Matcher
}

// kept is one device's compiled pillar.
type kept struct {
	mu     sync.Mutex // held while the device compiles
	pillar map[string]any
	errs   []string
	files  []fileRec
	grains uintptr
	at     time.Time
	stale  bool
	ok     bool
}

// New returns a Compiler over o.
func New(o Options) *Compiler {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	strategy := o.Strategy
	if strategy == "" {
		strategy = StrategySmart
	}
	top := strings.TrimPrefix(strings.TrimPrefix(o.StateTop, "salt://"), "/")
	if top == "" {
		top = "top.sls"
	}
	ttl := o.LookupTTL
	switch {
	case ttl == 0:
		ttl = fileserver.LookupTTL
	case ttl < 0:
		ttl = 0
	}
	return &Compiler{
		ttl: ttl,
		o:   o, roots: o.Roots, pillarenv: o.Pillarenv, strategy: strategy, nodegroups: o.Nodegroups,
		opts: o.Opts, topName: top, log: log, fs: fileserver.NewTTL(o.Roots, ttl), r: render.New(render.Options{}),
		devices: map[string]*kept{}, looks: map[string]*lookState{}, statics: map[[32]byte]*staticRender{},
		matchers: map[string]*targets.Matcher{},
	}
}

// For is device id's pillar: the kept one, compiled on first need and
// again when it may have changed (its grains, a pillar file it read, the
// cache TTL, Invalidate). When a compile fails to render (a top or SLS
// file with an error) and the device has a pillar already, that one is
// kept and the error logged; a first compile that fails gives Salt's
// pillar with its _errors. The error is only ctx's.
func (c *Compiler) For(ctx context.Context, id string) (map[string]any, error) {
	k := c.device(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	g := c.grains(id)
	if k.ok && c.fresh(k, g) {
		return k.pillar, nil
	}
	return c.compileKept(ctx, id, k, g)
}

// Refresh compiles device id's pillar now (saltutil.refresh_pillar) and
// keeps it as For does.
func (c *Compiler) Refresh(ctx context.Context, id string) (map[string]any, error) {
	k := c.device(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	return c.compileKept(ctx, id, k, c.grains(id))
}

// Cached is device id's kept pillar without compiling (nil: none yet).
func (c *Compiler) Cached(id string) map[string]any {
	c.mu.Lock()
	k := c.devices[id]
	c.mu.Unlock()
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ok {
		return nil
	}
	return k.pillar
}

// Invalidate makes the next need of device id's pillar compile it again
// (its grains changed).
func (c *Compiler) Invalidate(id string) {
	c.mu.Lock()
	k := c.devices[id]
	c.mu.Unlock()
	if k != nil {
		k.mu.Lock()
		k.stale = true
		k.mu.Unlock()
	}
}

// Forget drops device id's kept pillar (its key was deleted).
func (c *Compiler) Forget(id string) {
	c.mu.Lock()
	delete(c.devices, id)
	c.mu.Unlock()
}

// ForMany is For of each id, compiled in parallel (workers at a time);
// out[i] is ids[i]'s.
func (c *Compiler) ForMany(ctx context.Context, ids []string, workers int) ([]map[string]any, error) {
	out := make([]map[string]any, len(ids))
	if workers < 1 {
		workers = 1
	}
	var wg sync.WaitGroup
	next := make(chan int)
	var firstErr error
	var errMu sync.Mutex
	for w := 0; w < min(workers, len(ids)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p, err := c.For(ctx, ids[i])
				if err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					continue
				}
				out[i] = p
			}
		}()
	}
	for i := range ids {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return out, firstErr
}

// Show compiles device id's pillar afresh, keeping nothing, with
// pillarenv (when not "") in place of the configured one: the
// pillar.show_pillar runner. Rendering errors are given in full: only
// the master's operator sees them.
func (c *Compiler) Show(ctx context.Context, id, pillarenv string) map[string]any {
	cc := c
	if pillarenv != "" || !c.o.RenderErrorDetail {
		o := c.o
		if pillarenv != "" {
			o.Pillarenv = pillarenv
		}
		o.RenderErrorDetail = true
		cc = New(o)
	}
	res := cc.compile(ctx, id, c.grains(id))
	return res.pillar
}

// ShowTop is the merged pillar top data as device id's compile sees it
// (the pillar.show_top runner): {env: {target: [match, sls...]}}, or
// the errors reading it.
func (c *Compiler) ShowTop(ctx context.Context, id string) (map[string]any, []string) {
	r := c.newRun(ctx, id, c.grains(id))
	top, errs, _ := r.getTop()
	if len(errs) > 0 {
		return nil, errs
	}
	return top.plain(), nil
}

func (c *Compiler) device(id string) *kept {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.devices[id]
	if k == nil {
		k = &kept{}
		c.devices[id] = k
	}
	return k
}

func (c *Compiler) grains(id string) map[string]any {
	if c.o.Grains == nil {
		return nil
	}
	return c.o.Grains(id)
}

func mapID(m map[string]any) uintptr {
	if m == nil {
		return 0
	}
	return uintptr(reflect.ValueOf(m).UnsafePointer())
}

// fresh reports whether k may be given as it is.
func (c *Compiler) fresh(k *kept, g map[string]any) bool {
	if k.stale || k.grains != mapID(g) {
		return false
	}
	if c.o.CacheTTL > 0 && time.Since(k.at) > c.o.CacheTTL {
		return false
	}
	for _, f := range k.files {
		if c.current(f.lookup) != f {
			return false
		}
	}
	return true
}

// compileKept compiles device id and keeps the result in k (k.mu held).
func (c *Compiler) compileKept(ctx context.Context, id string, k *kept, g map[string]any) (map[string]any, error) {
	res := c.compile(ctx, id, g)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compile pillar of %s: %w", id, err)
	}
	k.files, k.grains, k.at, k.stale, k.errs = res.files, mapID(g), time.Now(), false, res.errs
	if res.renderFailed && k.ok {
		c.log.Error("pillar render failed; the device keeps its previous pillar", zap.String("id", id), zap.Strings("errors", res.details))
		return k.pillar, nil
	}
	k.pillar, k.ok = res.pillar, true
	return k.pillar, nil
}

// result is one compile.
type result struct {
	pillar       map[string]any
	errs         []string // _errors
	details      []string // rendering errors in full
	renderFailed bool
	files        []fileRec
}

// compile is Salt's Pillar.compile_pillar for device id with grains g.
func (c *Compiler) compile(ctx context.Context, id string, g map[string]any) result {
	r := c.newRun(ctx, id, g)
	top, topErrs, _ := r.getTop()
	var pillar map[string]any
	var errs []string
	if c.o.ExtPillarFirst {
		ext, e := r.extPillar(map[string]any{}, nil)
		r.pillarVar = ext
		errs = e
		var p map[string]any
		p, errs = r.renderPillar(r.topMatches(top), errs)
		pillar = Merge(ext, p, c.strategy, c.o.MergeLists)
	} else {
		pillar, errs = r.renderPillar(r.topMatches(top), nil)
		pillar, errs = r.extPillar(pillar, errs)
	}
	errs = append(errs, topErrs...)
	if len(errs) > 0 {
		for _, e := range errs {
			c.log.Error("Pillar render error", zap.String("id", id), zap.String("error", e))
		}
		pillar = maps(pillar)
		pillar["_errors"] = toAny(errs)
	}
	files := make([]fileRec, 0, len(r.files))
	for _, f := range r.files {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].lookup < files[j].lookup })
	return result{pillar: pillar, errs: errs, details: r.details, renderFailed: r.renderFailed, files: files}
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// run is one device's compile.
type run struct {
	c         *Compiler
	ctx       context.Context
	id        string
	grains    map[string]any
	pillarVar map[string]any // what templates see as pillar
	files     map[string]fileRec
	ignored   map[string]map[string]bool // env -> SLS, ignore_missing
	rendered  int
	// renderFailed: a top or SLS file did not render; details are the
	// errors in full.
	renderFailed bool
	details      []string
}

func (c *Compiler) newRun(ctx context.Context, id string, g map[string]any) *run {
	if g == nil {
		g = map[string]any{}
	}
	return &run{c: c, ctx: ctx, id: id, grains: g, pillarVar: map[string]any{}, files: map[string]fileRec{}, ignored: map[string]map[string]bool{}}
}

// envs is Salt's _get_envs: base, then pillar_roots' environments.
func (c *Compiler) envs() []string {
	out := []string{"base"}
	var rest []string
	for e := range c.roots {
		if e != "base" {
			rest = append(rest, e)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func (c *Compiler) hasEnv(env string) bool {
	for _, e := range c.envs() {
		if e == env {
			return true
		}
	}
	return false
}

// topEnv is one target of the merged top data.
type topTarget struct {
	tgt   string
	data  []any // the match mappings, then the SLS names
	order int
}

type topEnv struct {
	env     string
	targets []*topTarget
}

type mergedTop struct{ envs []*topEnv }

func (t *mergedTop) plain() map[string]any {
	out := map[string]any{}
	for _, e := range t.envs {
		m := map[string]any{}
		for _, tg := range e.targets {
			m[tg.tgt] = tg.data
		}
		out[e.env] = m
	}
	return out
}

// getTop is Salt's get_tops and merge_tops (salt/pillar/__init__.py):
// every environment's top file (pillarenv's only, when set; base's only
// with strategy none), and the top files they include, merged: a target
// given again replaces the earlier one; targets sorted by their order.
func (r *run) getTop() (*mergedTop, []string, bool) {
	c := r.c
	var envs []string
	switch {
	case c.pillarenv != "":
		if _, ok := c.roots[c.pillarenv]; ok {
			envs = []string{c.pillarenv}
		}
	case c.strategy == StrategyNone:
		envs = []string{"base"}
	default:
		envs = c.envs()
	}
	type ctop struct {
		env     string
		entries []sls.Entry
	}
	var tops []ctop
	var errs []string
	failed := false
	includes := map[string][]string{}
	var incOrder []string
	for _, env := range envs {
		l := r.read(lookupKey(lkFile, env, fileserver.CreateURL(c.topName, "")))
		if l.err != nil {
			errs = append(errs, "Rendering Primary Top file failed, render error:\n"+l.err.Error())
			failed = true
			continue
		}
		if l.rec.path == "" {
			continue
		}
		entries, err := r.render(env, "", l, nil)
		if err != nil {
			errs = append(errs, "Rendering Primary Top file failed, render error:\n"+err.Error())
			r.renderError(err)
			failed = true
			continue
		}
		tops = append(tops, ctop{env, entries})
		for _, e := range entries {
			if e.ID == "include" {
				if l, ok := e.Value.([]any); ok {
					if _, seen := includes[env]; !seen {
						incOrder = append(incOrder, env)
					}
					for _, s := range l {
						includes[env] = append(includes[env], fmt.Sprint(s))
					}
				}
			}
		}
	}
	done := map[string]bool{}
	for len(incOrder) > 0 {
		env := incOrder[0]
		incOrder = incOrder[1:]
		names := includes[env]
		delete(includes, env)
		for _, name := range names {
			if done[env+"\x00"+name] {
				continue
			}
			done[env+"\x00"+name] = true
			l := r.read(lookupKey(lkSLS, env, name))
			if l.err != nil || l.rec.path == "" {
				msg := "No matching sls found"
				if l.err != nil {
					msg = l.err.Error()
				}
				errs = append(errs, fmt.Sprintf("Rendering Top file %s failed, render error:\n%s", name, msg))
				continue
			}
			entries, err := r.render(env, name, l, nil)
			if err != nil {
				errs = append(errs, fmt.Sprintf("Rendering Top file %s failed, render error:\n%s", name, err))
				r.renderError(err)
				failed = true
				continue
			}
			tops = append(tops, ctop{env, entries})
		}
	}
	top := &mergedTop{}
	idx := map[string]*topEnv{}
	for _, ct := range tops {
		for _, e := range ct.entries {
			if e.ID == "include" {
				continue
			}
			tm, ok := e.Value.(map[string]any)
			if !ok {
				if e.Value == nil {
					continue
				}
				errs = append(errs, "Error encountered while rendering pillar top file.")
				continue
			}
			te := idx[e.ID]
			if te == nil {
				te = &topEnv{env: e.ID}
				idx[e.ID] = te
				top.envs = append(top.envs, te)
			}
			for _, tgt := range e.Keys {
				body, _ := tm[tgt].([]any)
				if s, ok := tm[tgt].(string); ok {
					body = []any{s}
				}
				tt := &topTarget{tgt: tgt}
				var states []any
				seen := map[string]bool{}
				ignore := false
				for _, comp := range body {
					switch x := comp.(type) {
					case map[string]any:
						if _, ok := x["match"]; ok {
							tt.data = append(tt.data, x)
						}
						if o, ok := x["order"]; ok {
							tt.order, _ = toInt(o)
						}
						if state.Truthy(x["ignore_missing"]) {
							ignore = true
						}
					case string:
						if !seen[x] {
							seen[x] = true
							states = append(states, x)
						}
					}
				}
				if ignore {
					if r.ignored[e.ID] == nil {
						r.ignored[e.ID] = map[string]bool{}
					}
					for _, s := range states {
						r.ignored[e.ID][s.(string)] = true
					}
				}
				tt.data = append(tt.data, states...)
				replaced := false
				for i, old := range te.targets {
					if old.tgt == tgt {
						te.targets[i] = tt
						replaced = true
						break
					}
				}
				if !replaced {
					te.targets = append(te.targets, tt)
				}
			}
		}
	}
	for _, te := range top.envs {
		sort.SliceStable(te.targets, func(i, j int) bool { return te.targets[i].order < te.targets[j].order })
	}
	return top, errs, failed
}

// envSLS is one environment's matched SLS names, in order.
type envSLS struct {
	env  string
	mods []string
}

// topMatches is Salt's top_matches: for each environment (pillarenv's
// only, when set), the SLS names of every target the device matches
// (confirm_top: the last "match:" given, compound by default).
func (r *run) topMatches(top *mergedTop) []envSLS {
	var out []envSLS
	for _, te := range top.envs {
		if r.c.pillarenv != "" && te.env != r.c.pillarenv {
			continue
		}
		var cur *envSLS
		for _, tt := range te.targets {
			typ := "compound"
			for _, it := range tt.data {
				if m, ok := it.(map[string]any); ok {
					if v, ok := m["match"]; ok {
						typ = fmt.Sprint(v)
					}
				}
			}
			ok, err := r.match(typ, tt.tgt)
			if err != nil {
				r.c.log.Warn("pillar top file target", zap.String("id", r.id), zap.String("target", tt.tgt), zap.String("match", typ), zap.Error(err))
				continue
			}
			if !ok {
				continue
			}
			if cur == nil {
				out = append(out, envSLS{env: te.env})
				cur = &out[len(out)-1]
			}
			for _, it := range tt.data {
				if s, ok := it.(string); ok && !containsStr(cur.mods, s) {
					cur.mods = append(cur.mods, s)
				}
			}
		}
	}
	return out
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// match is confirm_top's matcher of tgtType on the device.
func (r *run) match(tgtType, tgt string) (bool, error) {
	m, err := r.c.matcher(tgtType, tgt)
	if err != nil {
		return false, err
	}
	return m.Match(&targets.Minion{ID: r.id, Grains: r.grains, Pillar: r.pillarVar}), nil
}

func (c *Compiler) matcher(tgtType, tgt string) (*targets.Matcher, error) {
	k := tgtType + "\x00" + tgt
	c.mu.Lock()
	m, ok := c.matchers[k]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := targets.Compile(tgt, tgtType, targets.Options{Nodegroups: c.nodegroups})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.matchers) > 4096 {
		clear(c.matchers)
	}
	c.matchers[k] = m
	c.mu.Unlock()
	return m, nil
}

// inNodegroup reports whether device id is in nodegroup ng.
func (c *Compiler) inNodegroup(id, ng string) (bool, error) {
	m, err := c.matcher("nodegroup", ng)
	if err != nil {
		return false, err
	}
	return m.Match(&targets.Minion{ID: id, Grains: c.grains(id)}), nil
}

// renderPillar is Salt's render_pillar: each environment's matched SLS
// (globs matched against the environment's SLS names), rendered and
// merged in order.
func (r *run) renderPillar(matches []envSLS, errs []string) (map[string]any, []string) {
	pillar := map[string]any{}
	for _, m := range matches {
		var files []string
		avail, ok := r.avail(m.env)
		for _, pat := range m.mods {
			var matched []string
			if !ok {
				errs = append(errs, fmt.Sprintf("No matching pillar environment for environment '%s' found", m.env))
			} else {
				for _, a := range avail {
					if state.Fnmatch(a, pat) {
						matched = append(matched, a)
					}
				}
			}
			if len(matched) > 0 {
				files = append(files, matched...)
			} else {
				files = append(files, pat)
			}
		}
		mods := map[string]map[string]any{}
		for _, s := range files {
			p, e := r.renderPstate(s, m.env, mods, nil, 0)
			errs = append(errs, e...)
			if p != nil {
				pillar = Merge(pillar, p, r.c.strategy, r.c.o.MergeLists)
			}
		}
	}
	return pillar, errs
}

// avail is the SLS names of env (Salt's __gather_avail), ok false for an
// environment that is not one of _get_envs'.
func (r *run) avail(env string) ([]string, bool) {
	if !r.c.hasEnv(env) {
		return nil, false
	}
	return r.read(lookupKey(lkList, env, "")).list, true
}

// renderPstate is Salt's render_pstate: one SLS rendered, its includes
// rendered and merged under it (the including file merged last, so its
// values win, unless pillar_includes_override_sls).
func (r *run) renderPstate(name, env string, mods map[string]map[string]any, defaults map[string]any, depth int) (map[string]any, []string) {
	var errs []string
	if depth > 64 {
		return nil, []string{fmt.Sprintf("Include of SLS '%s' nested too deep", name)}
	}
	if r.rendered++; r.rendered > maxSLS {
		if r.rendered == maxSLS+1 {
			errs = append(errs, fmt.Sprintf("more than %d pillar SLS files rendered", maxSLS))
		}
		return nil, errs
	}
	l := r.read(lookupKey(lkSLS, env, name))
	if l.err != nil {
		errs = append(errs, fmt.Sprintf("Rendering SLS '%s' failed, render error:\n%v", name, l.err))
		return nil, errs
	}
	if l.rec.path == "" {
		if r.ignored[env][name] {
			return nil, nil
		}
		if len(r.c.roots[env]) > 0 {
			msg := fmt.Sprintf("Specified SLS '%s' in environment '%s' is not available on the salt master", name, env)
			return nil, []string{msg}
		}
		return nil, nil
	}
	entries, err := r.render(env, name, l, defaults)
	if err != nil {
		r.renderError(err)
		mods[name] = nil
		var se *sls.Error
		if errors.As(err, &se) && strings.HasPrefix(se.Err.Error(), "expected a mapping of IDs at the top") {
			return nil, []string{fmt.Sprintf("SLS '%s' does not render to a dictionary", name)}
		}
		if r.c.o.RenderErrorDetail {
			return nil, []string{fmt.Sprintf("Rendering SLS '%s' failed, render error:\n%v", name, err)}
		}
		return nil, []string{fmt.Sprintf("Rendering SLS '%s' failed. Please see master log for details.", name)}
	}
	st := entriesMap(entries)
	mods[name] = st
	inc, has := st["include"]
	if !has {
		return st, errs
	}
	incl, ok := inc.([]any)
	if !ok {
		return st, append(errs, fmt.Sprintf("Include Declaration in SLS '%s' is not formed as a list", name))
	}
	own := make(map[string]any, len(st))
	for k, v := range st {
		if k != "include" {
			own[k] = v
		}
	}
	st = own
	var states []map[string]any
	avail, okEnv := r.avail(env)
	for _, item := range incl {
		sub := ""
		var subDefaults map[string]any
		keyPath := ""
		switch x := item.(type) {
		case string:
			sub = x
		case map[string]any:
			for k, v := range x {
				sub = k
				if vm, ok := v.(map[string]any); ok {
					subDefaults, _ = vm["defaults"].(map[string]any)
					if kp, ok := vm["key"]; ok && kp != nil {
						keyPath = fmt.Sprint(kp)
					}
				}
				break
			}
		default:
			sub = fmt.Sprint(x)
		}
		var matched []string
		if !okEnv {
			errs = append(errs, fmt.Sprintf("No matching pillar environment for environment '%s' found", env))
			matched = []string{sub}
		} else {
			pat := strings.ReplaceAll(strings.TrimLeft(sub, "."), "/", ".")
			for _, a := range avail {
				if state.Fnmatch(a, pat) {
					matched = append(matched, a)
				}
			}
			if strings.HasPrefix(sub, ".") {
				parts := strings.Split(name, ".")
				if !strings.HasSuffix(l.rel, "/init.sls") {
					parts = parts[:len(parts)-1]
				}
				sub = strings.Join(append(parts, sub[1:]), ".")
			}
			for _, a := range avail {
				if state.Fnmatch(a, sub) {
					matched = append(matched, a)
				}
			}
			if len(matched) == 0 {
				matched = []string{sub}
			}
		}
		for _, m := range matched {
			var ns map[string]any
			if prev, seen := mods[m]; seen {
				ns = prev
			} else {
				var e []string
				ns, e = r.renderPstate(m, env, mods, subDefaults, depth+1)
				errs = append(errs, e...)
			}
			if len(ns) == 0 {
				continue
			}
			var nv any = ns
			if keyPath != "" {
				parts := strings.Split(keyPath, ":")
				for i := len(parts) - 1; i >= 0; i-- {
					nv = map[string]any{parts[i]: nv}
				}
			}
			nm := nv.(map[string]any)
			if r.c.o.IncludesOverrideSLS {
				st = Merge(st, nm, r.c.strategy, r.c.o.MergeLists)
			} else {
				states = append(states, nm)
			}
		}
	}
	if !r.c.o.IncludesOverrideSLS {
		states = append(states, st)
		var out map[string]any
		for _, s := range states {
			if out == nil {
				out = s
			} else {
				out = Merge(out, s, r.c.strategy, r.c.o.MergeLists)
			}
		}
		st = out
	}
	return st, errs
}

// renderError records a rendering error: the compile failed to render,
// and the error in full, with its file and line, goes to the log.
func (r *run) renderError(err error) {
	r.renderFailed = true
	r.details = append(r.details, err.Error())
}

// extPillar is Salt's ext_pillar: each configured interface in order,
// its data merged over the pillar. A failing interface is an error in
// _errors and in the log; the others go on.
func (r *run) extPillar(pillar map[string]any, errs []string) (map[string]any, []string) {
	for _, item := range r.c.o.ExtPillar {
		m, ok := item.(map[string]any)
		if !ok {
			errs = append(errs, `The "ext_pillar" option is malformed`)
			r.c.log.Error(errs[len(errs)-1])
			return map[string]any{}, errs
		}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			ext, err := r.c.extCall(r.ctx, name, m[name], r.id)
			switch {
			case errors.Is(err, errUnavailable):
				msg := fmt.Sprintf("Specified ext_pillar interface %s is unavailable", name)
				r.c.log.Error(msg, zap.String("id", r.id))
				errs = append(errs, msg)
				continue
			case err != nil:
				msg := fmt.Sprintf("Failed to load ext_pillar %s: %v", name, err)
				r.c.log.Error("ext_pillar failed", zap.String("id", r.id), zap.String("ext_pillar", name), zap.Error(err))
				errs = append(errs, msg)
				continue
			}
			if len(ext) > 0 {
				pillar = Merge(pillar, ext, r.c.strategy, r.c.o.MergeLists)
			}
		}
	}
	return pillar, errs
}

// staticRender is a file without template syntax, rendered once.
type staticRender struct {
	entries []sls.Entry
	err     error
}

// render renders pillar file l (SLS name of env; "" for a top file) for
// the device. A file with no template syntax is rendered once for all.
func (r *run) render(env, name string, l *looked, defaults map[string]any) ([]sls.Entry, error) {
	static := len(defaults) == 0 && !hasTemplate(l.src)
	var key [32]byte
	if static {
		h := sha256.New()
		h.Write(l.rec.sum[:])
		h.Write([]byte(l.rec.path + "\x00" + env + "\x00" + name))
		h.Sum(key[:0])
		r.c.mu.Lock()
		s := r.c.statics[key]
		r.c.mu.Unlock()
		if s != nil {
			return s.entries, s.err
		}
	}
	vars := render.SLSVars(name, l.rel, l.rec.path)
	for k, v := range defaults {
		vars[k] = v
	}
	vars["grains"] = r.grains
	vars["pillar"] = r.pillarVar
	vars["saltenv"] = env
	vars["pillarenv"] = r.c.pillarenv
	vars["opts"] = map[string]any{"id": r.id, "grains": r.grains, "pillar": r.pillarVar, "saltenv": env, "pillarenv": r.c.pillarenv}
	_, entries, err := r.c.r.Render(l.rec.path, l.src, render.Context{Vars: vars, Salt: r.saltFunc, Files: loader{r: r, env: env}})
	if static {
		r.c.mu.Lock()
		if len(r.c.statics) > 8192 {
			clear(r.c.statics)
		}
		r.c.statics[key] = &staticRender{entries: entries, err: err}
		r.c.mu.Unlock()
	}
	return entries, err
}

func hasTemplate(src []byte) bool {
	s := string(src)
	return strings.Contains(s, "{{") || strings.Contains(s, "{%") || strings.Contains(s, "{#")
}
