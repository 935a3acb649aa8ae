package statecomp

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/fileserver"
	"github.com/halite-fleet/halite/render"
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
	// Files is the master's file server (shared with the rest of the
	// master); nil: one over FileRoots.
	Files     *fileserver.Server
	FileRoots map[string][]string
	// Top is how the top files are read and merged (state_top,
	// state_top_saltenv, top_file_merging_strategy, default_top,
	// env_order).
	Top config.StateTop
	// Pillar is the device's pillar; nil: empty (issue 18 fills it).
	Pillar func(id string) map[string]any
	// Opts is the master's config, for config.get.
	Opts map[string]any
	// Nodegroups is the master's nodegroups, for match.compound and top
	// files that match N@.
	Nodegroups map[string]any
}

// Compiler compiles states for devices, with a cache. Safe for
// concurrent use.
type Compiler struct {
	fs         *fileserver.Server
	top        config.StateTop
	pillarFn   func(string) map[string]any
	opts       map[string]any
	nodegroups map[string]any
	r          *render.Renderer

	mu       sync.Mutex
	matchers map[string]*targets.Matcher
	families map[[32]byte]*family
	scans    map[[32]byte][]string // static deps by file content
	lists    map[string][]string   // the scans' lists, one of each
}

// New returns a Compiler.
func New(o Options) *Compiler {
	fs := o.Files
	if fs == nil {
		fs = fileserver.New(o.FileRoots)
	}
	top := o.Top
	if top.StateTop == "" {
		top.StateTop = "top.sls"
	}
	if top.DefaultTop == "" {
		top.DefaultTop = "base"
	}
	return &Compiler{
		fs: fs, top: top, pillarFn: o.Pillar, opts: o.Opts, nodegroups: o.Nodegroups,
		r:        render.New(render.Options{}),
		matchers: map[string]*targets.Matcher{}, families: map[[32]byte]*family{},
		scans: map[[32]byte][]string{}, lists: map[string][]string{},
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
	cl := &call{c: c, memo: state.NewMemo()}
	fam.validate(cl)

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
					e, ran = fam.get(c, req, k, highstate, &devs[i], cl)
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
	sum   [32]byte       // of state
	deps  []string       // dependencies learned by the compile
	files []fileRec
}

func errEntry(msg string) *entry {
	e := &entry{state: map[string]any{"low": []any{}, "errors": []any{msg}}}
	e.sum = canonSum(e.state)
	e.once.Do(func() {})
	return e
}

// forRequest is the entry's Result for req: its state with "test", and
// its sum.
func (e *entry) forRequest(req Request) *Result {
	if req.Test == nil {
		return &Result{State: e.state, Sum: e.sum}
	}
	st := make(map[string]any, len(e.state)+1)
	for k, v := range e.state {
		st[k] = v
	}
	t := truthy(req.Test)
	st["test"] = t
	r := &Result{State: st}
	h := sha256.New()
	h.Write(e.sum[:])
	if t {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	h.Sum(r.Sum[:0])
	return r
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

// opts is the device's opts as a template sees them (a minion's, as far
// as the master knows them).
func (d *device) opts(env string) map[string]any {
	return map[string]any{"id": d.id, "saltenv": env, "grains": d.grains, "pillar": d.pillar, "file_client": "remote"}
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

// compile runs one device's compile: the top file (a highstate), the SLS
// files through package state, the requisite checks, and the salt://
// sources inlined.
func (c *Compiler) compile(req Request, k kind, highstate bool, d *device, cl *call) *entry {
	// Sized for a highstate of some tens of files.
	r := &run{c: c, call: cl, d: d, deps: make(map[string]bool, 8), files: make(map[string]*looked, 32), srcs: make([]*looked, 0, 32), keys: make(map[depsID][32]byte, 4)}
	st := map[string]any{"saltenv": req.Saltenv, "mods": toAny(req.Mods)}
	var errs []string
	var matches []state.EnvSLS
	if highstate {
		var topErrs []string
		matches, topErrs = r.top(req.Saltenv)
		errs = append(errs, topErrs...)
		if k == kindTop {
			t := map[string]any{}
			for env, mods := range state.Matched(matches) {
				t[env] = toAny(mods)
			}
			st["top"] = t
		}
		if len(matches) == 0 && len(errs) == 0 {
			errs = append(errs, "No Top file or master_tops data matches found. Please see master log for details.")
		}
	} else {
		matches = []state.EnvSLS{{Env: req.Saltenv, SLS: req.Mods}}
	}
	var low []state.Chunk
	if k != kindTop && len(errs) == 0 {
		var comp state.Compiled
		if k == kindHigh {
			comp = r.call.memo.Highstate(r, matches)
			st["high"] = comp.High
		} else {
			comp = r.call.memo.CompileMatches(r, matches)
		}
		low = comp.Low
		errs = append(errs, state.Strings(comp.Errors)...)
		if len(errs) == 0 && k == kindApply {
			// Salt's call_chunk fails such states as it reaches them; the
			// issue asks for them to stop the run before anything runs.
			errs = append(errs, state.Check(low)...)
		}
		if len(errs) == 0 && k == kindApply {
			if err := c.fs.Inline(ownForInline(low), req.Saltenv, r.renderSource(defaultEnv(req.Saltenv))); err != nil {
				errs = append(errs, err.Error())
			}
			r.recordInlined(low, defaultEnv(req.Saltenv))
		}
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
	files := make([]fileRec, 0, len(r.files))
	for _, l := range r.files {
		files = append(files, l.rec)
	}
	return &entry{state: st, sum: canonSum(st), deps: deps, files: files}
}

// ownForInline copies the chunks of low that fileserver.Inline may
// change, and gives them (in low's order) for Inline: it fills
// file.managed, cmd.script, archive.extracted and file.recurse chunks and
// deletes its keys from any chunk that has them (it leaves the others as
// they are, but deleting is writing). The others stay as package state
// gave them, maybe shared with other compiles (state.Compiled.Low),
// which nothing changes.
func ownForInline(low []state.Chunk) []state.Chunk {
	var out []state.Chunk
	for i, c := range low {
		if inlineMayChange(c) {
			low[i] = maps.Clone(c)
			out = append(out, low[i])
		}
	}
	return out
}

func inlineMayChange(c state.Chunk) bool {
	switch c.State() {
	case "file":
		if f := c.Fun(); f == "managed" || f == "recurse" {
			return true
		}
	case "cmd":
		if c.Fun() == "script" {
			return true
		}
	case "archive":
		if c.Fun() == "extracted" {
			return true
		}
	}
	for _, k := range inlineKeys {
		if _, ok := c[k]; ok {
			return true
		}
	}
	return false
}

var inlineKeys = []string{fileserver.KeyFiles, fileserver.KeyDirs, fileserver.KeyMissing, fileserver.KeyTooLarge, fileserver.KeyErrors}

func defaultEnv(env string) string {
	if env == "" {
		return "base"
	}
	return env
}

// topMemo is the merged top data of a call, by the renderings of the top
// files it came from.
type topMemo struct {
	top  *state.Top
	errs []string
}

// topEnvs are the environments whose top files are read, in Salt's order
// (BaseHighState._get_envs and get_tops): saltenv alone when given, else
// state_top_saltenv alone when set, else base, then the others by name,
// or env_order's when set.
func (c *Compiler) topEnvs(saltenv string) []string {
	if saltenv != "" {
		return []string{saltenv}
	}
	if c.top.StateTopSaltenv != "" {
		return []string{c.top.StateTopSaltenv}
	}
	have := c.fs.Envs()
	if len(c.top.EnvOrder) > 0 {
		var out []string
		seen := map[string]bool{}
		for _, e := range c.top.EnvOrder {
			if !seen[e] && contains(have, e) {
				seen[e] = true
				out = append(out, e)
			}
		}
		return out
	}
	out := []string{"base"}
	for _, e := range have {
		if e != "base" && e != "__env__" {
			out = append(out, e)
		}
	}
	return out
}

func contains(l []string, x string) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

// top renders the top files, merges them (top_file_merging_strategy) and
// matches the device against their targets (Salt's get_tops, merge_tops
// and top_matches in salt/state.py). Each target's match is a dependency
// of the compile.
func (r *run) top(saltenv string) ([]state.EnvSLS, []string) {
	envs := r.c.topEnvs(saltenv)
	name := strings.TrimPrefix(r.c.top.StateTop, "salt://")
	tops := make([]state.TopFile, 0, len(envs))
	var errs []string
	h := sha256.New()
	for _, env := range envs {
		l := r.read(lookupKey(lkFile, env, fileserver.CreateURL(name, "")))
		tf := state.TopFile{Env: env}
		switch {
		case l.err != nil:
			errs = append(errs, l.err.Error())
		case l.rec.path != "":
			entries, key, err := r.render(env, "", l)
			if err != nil {
				errs = append(errs, fmt.Sprintf("Rendering Primary Top file failed, render error: %v", err))
				break
			}
			tf.File, tf.Entries = l.rec.path, entries
			h.Write(key[:])
		}
		h.Write([]byte(env + "\x00"))
		tops = append(tops, tf)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	var key [32]byte
	h.Sum(key[:0])
	var tm *topMemo
	if v, ok := r.call.tops.Load(key); ok {
		tm = v.(*topMemo)
	} else {
		t, merrs := state.MergeTops(tops, r.c.top.TopFileMergingStrategy, r.c.top.DefaultTop)
		t.Avail = r.c.fs.Envs()
		tm = &topMemo{top: t, errs: append(merrs, t.Verify()...)}
		r.call.tops.Store(key, tm)
	}
	if len(tm.errs) > 0 {
		return nil, tm.errs
	}
	return tm.top.Match(saltenv, func(tgt, tgtType string) (bool, error) {
		r.deps["m:"+tgtType+":"+tgt] = true
		return r.c.match(r.d, tgtType, tgt, "")
	})
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
