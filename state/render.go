package state

import (
	"errors"
	"fmt"
	"strings"

	"github.com/halite-fleet/halite/render/sls"
)

// Loader reads one SLS file, rendered: the file it came from (a path
// ending in "/init.sls" makes relative includes count from the package,
// as Salt does) and its top-level entries in file order. When the SLS
// does not exist in env, err wraps ErrNotFound; any other error is a
// rendering error (a *sls.Error gives its file and line).
type Loader interface {
	Load(env, sls string) (file string, entries []sls.Entry, err error)
}

// ErrNotFound is what a Loader's error wraps when an SLS does not exist.
var ErrNotFound = errors.New("sls not found")

// Lister may also be implemented by a Loader: the environments that
// exist, and the SLS names in one (a/b.sls and a/b/init.sls as "a.b"). With
// it, globs in include and in the top file match SLS names and an
// include of an unknown env is Salt's "Nonexistent saltenv" error;
// without it, every name is taken as written and every env exists.
type Lister interface {
	Envs() []string
	List(env string) []string
}

// EnvSLS is one environment's SLS names to apply, in order: what the top
// file gave for a device, or the mods of state.sls.
type EnvSLS struct {
	Env string
	SLS []string
}

// Error is one compile error: Salt's message (Msg, the string Salt
// returns) and, where known, the file and line of the entry at fault.
type Error struct {
	Msg  string
	File string
	Line int
}

// String is Msg with the file and line after it when they are known.
func (e Error) String() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s (%s, line %d)", e.Msg, e.File, e.Line)
	case e.File != "":
		return fmt.Sprintf("%s (%s)", e.Msg, e.File)
	}
	return e.Msg
}

// Strings is errs as strings.
func Strings(errs []Error) []string {
	if len(errs) == 0 {
		return nil
	}
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.String()
	}
	return out
}

// Compiled is what CompileMatches gives.
type Compiled struct {
	// High is Salt's high data as render_highstate leaves it (what
	// state.show_highstate shows): ID -> {state: [args], "__sls__",
	// "__env__"}, plus "__extend__" and "__exclude__" when declared.
	// Only Highstate and Compile fill it.
	High map[string]any
	// Low is the low state, ordered by Order; nil when Errors is not empty.
	// Compiled through a Memo, chunks may be shared with the other
	// compiles that use it: read only (copy one to change it).
	Low []Chunk
	// Errors are Salt's compile errors; when there are some nothing may run.
	Errors []Error
}

// Compile renders mods in env as state.sls does and compiles them: high
// data, the ordered low state, and Salt's errors as strings (see Error).
func Compile(ld Loader, env string, mods []string) (high map[string]any, low []Chunk, errs []string) {
	c := compileMatches(ld, []EnvSLS{{Env: env, SLS: mods}}, true, nil)
	return c.High, c.Low, Strings(c.Errors)
}

// Highstate is the high data as state.show_highstate shows it (Salt's
// compile_highstate: render_highstate and its errors), and the low state
// compiled from it.
func Highstate(ld Loader, matches []EnvSLS) Compiled {
	return compileMatches(ld, matches, true, nil)
}

// CompileMatches renders and compiles the SLS of each env in order (a
// highstate: what Top.Match gave), the way Salt's state.highstate and
// state.sls do: render_highstate (includes, extend, exclude, the short
// and long forms, state_auto_order), and when that has no error,
// reconcile_extend, verify_high, requisite_in, apply_exclude,
// compile_high_data and order_chunks.
//
// Compiled.High is left nil (Highstate fills it).
func CompileMatches(ld Loader, matches []EnvSLS) Compiled {
	return compileMatches(ld, matches, false, nil)
}

func compileMatches(ld Loader, matches []EnvSLS, wantHigh bool, memo *Memo) Compiled {
	c := &compiler{ld: ld, memo: memo, iorder: 10000, mods: make(map[envSLS]string, slsCount(matches)), matches: matches}
	if l, ok := ld.(Lister); ok {
		c.lister = l
		c.avail = map[string][]string{}
	}
	high, errs := c.renderHighstate()
	var out Compiled
	if wantHigh {
		out.High = high.plainHigh()
	}
	if len(errs) > 0 {
		out.Errors = errs
		return out
	}
	out.Errors = append(out.Errors, c.reconcileExtend(high, false)...)
	out.Errors = append(out.Errors, c.verifyHigh(high)...)
	if len(out.Errors) > 0 {
		return out
	}
	out.Errors = append(out.Errors, c.requisiteIn(high)...)
	applyExclude(high)
	if len(out.Errors) > 0 {
		return out
	}
	low, shared, err := compileHighData(high)
	if err != nil {
		out.Errors = append(out.Errors, Error{Msg: err.Error()})
		return out
	}
	out.Low = order(low, shared)
	return out
}

// highData is Salt's high data: IDs in order, and the global extend and
// exclude declarations.
type highData struct {
	ids     *omap // ID -> *omap body, or whatever a broken SLS gave
	extend  []*omap
	exclude []any
}

func newHigh() *highData { return &highData{ids: newOmap()} }

func (h *highData) plainHigh() map[string]any {
	out := h.ids.plain()
	if len(h.extend) > 0 {
		ext := make([]any, len(h.extend))
		for i, e := range h.extend {
			ext[i] = e.plain()
		}
		out["__extend__"] = ext
	}
	if len(h.exclude) > 0 {
		out["__exclude__"] = plainValue(h.exclude)
	}
	return out
}

// slsCount is how many SLS matches names (without globs and includes).
func slsCount(matches []EnvSLS) int {
	n := 0
	for _, m := range matches {
		n += len(m.SLS)
	}
	return min(n, 1024)
}

// envSLS is an SLS of an env.
type envSLS struct{ env, sls string }

type compiler struct {
	ld      Loader
	memo    *Memo
	lister  Lister
	avail   map[string][]string // env -> SLS names, from lister
	envs    []string
	iorder  int
	mods    map[envSLS]string // rendered (or failed): SLS -> file
	matches []EnvSLS
	// located are the files rendered, in order: the last one to declare
	// an ID says where it is.
	located []*fileHigh
	// owned are the ID bodies this compile made: the others (from the
	// files' high data, maybe a Memo's) are copied before they change.
	owned map[*omap]bool
}

func (c *compiler) envExists(env string) bool {
	if c.lister == nil {
		return true
	}
	if c.envs == nil {
		c.envs = c.lister.Envs()
		if c.envs == nil {
			c.envs = []string{}
		}
	}
	for _, e := range c.envs {
		if e == env || e == "__env__" {
			return true
		}
	}
	return false
}

// list is Salt's self.avail[env]: nil when there is no Lister.
func (c *compiler) list(env string) []string {
	if c.lister == nil {
		return nil
	}
	if l, ok := c.avail[env]; ok {
		return l
	}
	l := c.lister.List(env)
	c.avail[env] = l
	return l
}

// filter is fnmatch.filter(self.avail[env], pat); without a Lister a name
// without glob characters matches itself.
func (c *compiler) filter(env, pat string) []string {
	if c.lister == nil {
		if strings.ContainsAny(pat, "*?[") {
			return nil
		}
		return []string{pat}
	}
	return fnfilter(c.list(env), pat)
}

func (c *compiler) matchEnv(env string) bool {
	for _, m := range c.matches {
		if m.Env == env {
			return true
		}
	}
	return false
}

// at is the location of an ID for an error.
func (c *compiler) at(id string, msg string) Error {
	for i := len(c.located) - 1; i >= 0; i-- {
		if fh := c.located[i]; fh.located[id] {
			return fh.loc(id, msg)
		}
	}
	return Error{Msg: msg}
}

// own is high's body of id, target, made the compile's own (a copy,
// the first time) so that it may change.
func (c *compiler) own(high *highData, id string, target *omap) *omap {
	if c.owned[target] {
		return target
	}
	if c.owned == nil {
		c.owned = map[*omap]bool{}
	}
	t := target.clone()
	c.owned[t] = true
	high.ids.m[id] = t
	return t
}

// renderHighstate is BaseHighState.render_highstate.
func (c *compiler) renderHighstate() (*highData, []Error) {
	high := newHigh()
	if n := c.memo.idsHint(); n > 0 {
		high.ids = &omap{keys: make([]string, 0, n), m: make(map[string]any, n)}
	}
	var all []Error
	for _, m := range c.matches {
		for _, match := range m.SLS {
			var files []string
			switch {
			case c.envExists(m.Env):
				files = c.filter(m.Env, match)
			default:
				all = append(all, Error{Msg: fmt.Sprintf("No matching salt environment for environment '%s' found", m.Env)})
			}
			if len(files) == 0 {
				files = []string{match}
			}
			for _, name := range files {
				if _, done := c.mods[envSLS{m.Env, name}]; done {
					continue
				}
				st, errs := c.renderState(name, m.Env)
				if st != nil {
					c.mergeIncluded(high, st, &errs)
				}
				this := ""
				for i, e := range errs {
					if this == "" {
						this = fmt.Sprintf("SLS %s in saltenv", match)
					}
					if strings.Contains(e.Msg, "is not available") && strings.Contains(e.Msg, this) {
						errs[i] = Error{Msg: fmt.Sprintf("No matching sls found for '%s' in env '%s'", match, m.Env)}
					}
				}
				all = append(all, errs...)
			}
		}
	}
	cleanDuplicateExtends(high)
	c.memo.setIDsHint(len(high.ids.keys))
	return high, all
}

// cleanDuplicateExtends is clean_duplicate_extends: an extend declared
// twice (an SLS included twice) counts once.
func cleanDuplicateExtends(h *highData) {
	if h.extend == nil {
		return
	}
	var seen []*omap
	byID := map[string][]any{}
	for _, ext := range h.extend {
		for _, id := range ext.keys {
			body := ext.m[id]
			dup := false
			for _, b := range byID[id] {
				if equal(b, body) {
					dup = true
					break
				}
			}
			if !dup {
				byID[id] = append(byID[id], body)
				o := newOmap()
				o.set(id, body)
				seen = append(seen, o)
			}
		}
	}
	h.extend = seen
}

// mergeIncluded is merge_included_states: IDs must be globally unique.
func (c *compiler) mergeIncluded(high, st *highData, errs *[]Error) {
	high.extend = append(high.extend, st.extend...)
	high.exclude = append(high.exclude, st.exclude...)
	st.extend, st.exclude = nil, nil
	for _, id := range st.ids.keys {
		old, ok := high.ids.get(id)
		if !ok || equal(old, st.ids.m[id]) {
			continue
		}
		*errs = append(*errs, c.at(id, fmt.Sprintf("Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is '%s' and is found in SLS '%s:%s' and SLS '%s:%s'",
			id, bodyStr(old, "__env__"), bodyStr(old, "__sls__"), bodyStr(st.ids.m[id], "__env__"), bodyStr(st.ids.m[id], "__sls__"))))
	}
	for _, id := range st.ids.keys {
		high.ids.set(id, st.ids.m[id])
	}
}

func bodyStr(body any, k string) string {
	if o, ok := body.(*omap); ok {
		if v, ok := o.get(k); ok {
			return pyStr(v)
		}
	}
	return ""
}

var relInclude = func(s string) (levels int, rest string) {
	for levels < len(s) && s[levels] == '.' {
		levels++
	}
	return levels, s[levels:]
}

// renderState is BaseHighState.render_state: one SLS and, recursively,
// what it includes.
func (c *compiler) renderState(name, env string) (*highData, []Error) {
	var errs []Error
	file, entries, err := c.ld.Load(env, name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, []Error{{Msg: fmt.Sprintf("Specified SLS %s in saltenv %s is not available on the salt master or through a configured fileserver", name, env)}}
		}
		e := Error{Msg: fmt.Sprintf("Rendering SLS '%s:%s' failed: %v", env, name, err), File: file}
		var se *sls.Error
		if errors.As(err, &se) {
			e.File, e.Line = se.File, se.Line
		}
		c.mods[envSLS{env, name}] = ""
		return nil, []Error{e}
	}
	c.mods[envSLS{env, name}] = file
	if len(entries) == 0 {
		return nil, nil
	}
	fh := c.memo.file(file, name, env, entries)
	c.located = append(c.located, fh)
	errs = append(errs, fh.errs...)
	if len(fh.include) == 0 {
		o := fh.ordered(c.iorder)
		c.iorder += o.n
		return &highData{ids: o.ids, extend: fh.extend, exclude: fh.exclude}, errs
	}
	st := &highData{ids: fh.ids.clone(), extend: fh.extend, exclude: fh.exclude}
	loc := fh.loc
	for _, inc := range fh.include {
		envKey := env
		var incSLS string
		switch x := inc.(type) {
		case map[string]any:
			if len(x) == 0 {
				continue
			}
			envKey = first(x)
			incSLS = pyStr(x[envKey])
		case string:
			incSLS = x
		default:
			incSLS = pyStr(x)
		}
		if !c.envExists(envKey) {
			errs = append(errs, loc("include", fmt.Sprintf("Nonexistent saltenv '%s' found in include of '%s' within SLS '%s:%s'", envKey, incSLS, env, name)))
			continue
		}
		if strings.HasPrefix(incSLS, ".") {
			levels, rest := relInclude(incSLS)
			comps := strings.Split(name, ".")
			if strings.HasSuffix(file, "/init.sls") || file == "init.sls" {
				comps = append(comps, "init")
			}
			if levels > len(comps) {
				errs = append(errs, loc("include", fmt.Sprintf("Attempted relative include of '%s' within SLS '%s:%s' goes beyond top level package ", incSLS, env, name)))
				continue
			}
			incSLS = strings.Join(append(append([]string(nil), comps[:len(comps)-levels]...), rest), ".")
		}
		var resolved []string
		if envKey != "_xenv" {
			if c.matchEnv(envKey) || len(c.filter(envKey, incSLS)) > 0 {
				resolved = []string{envKey}
			}
		} else {
			for _, m := range c.matches {
				if len(c.filter(m.Env, incSLS)) > 0 {
					resolved = append(resolved, m.Env)
				}
			}
		}
		inResolved := false
		for _, r := range resolved {
			inResolved = inResolved || r == env
		}
		if len(resolved) == 1 || inResolved {
			targets := c.filter(env, incSLS)
			if len(targets) == 0 {
				targets = []string{incSLS}
			}
			for _, t := range targets {
				rEnv := env
				if len(resolved) == 1 {
					rEnv = resolved[0]
				}
				if _, done := c.mods[envSLS{rEnv, t}]; done {
					continue
				}
				nst, nerrs := c.renderState(t, rEnv)
				if nst != nil {
					c.mergeIncluded(st, nst, &errs)
				}
				errs = append(errs, nerrs...)
			}
			continue
		}
		var msg string
		if len(resolved) == 0 {
			in := envKey
			if envKey == "_xenv" {
				var envs []string
				for _, m := range c.matches {
					envs = append(envs, m.Env)
				}
				in = strings.Join(envs, ", ")
			}
			msg = fmt.Sprintf("Unknown include: Specified SLS %s: %s is not available on the salt master in saltenv(s): %s ", envKey, incSLS, in)
		} else {
			msg = fmt.Sprintf("Ambiguous include: Specified SLS %s: %s is available on the salt master in multiple available saltenvs: %s", envKey, incSLS, strings.Join(resolved, ", "))
		}
		errs = append(errs, loc("include", msg))
	}
	c.handleIorder(st, fh)
	return st, errs
}

// handleIorder is _handle_iorder with state_auto_order on (Salt's
// default): each state declaration without an order gets the next number
// from 10000, in the order the IDs were rendered (included SLS first).
// The file's own IDs come first in st and those it included are ordered
// already: when the own IDs' bodies are still fh's, fh's ordered bodies
// (kept by first number) take their place.
func (c *compiler) handleIorder(st *highData, fh *fileHigh) {
	for _, id := range fh.ids.keys {
		if b, ok := fh.ids.m[id].(*omap); ok {
			if sb, ok := st.ids.m[id].(*omap); !ok || sb != b {
				c.iorder += autoOrder(st.ids, c.iorder) // an include replaced it
				return
			}
		}
	}
	o := fh.ordered(c.iorder)
	for _, id := range fh.ids.keys {
		if b, ok := o.ids.m[id].(*omap); ok {
			st.ids.m[id] = b
		}
	}
	c.iorder += o.n
}

// autoOrder gives each state declaration of ids without an order the next
// number from next on, copying the bodies it changes; it returns how many
// numbers it gave.
func autoOrder(ids *omap, next int) int {
	n := 0
	for _, id := range ids.keys {
		body, ok := ids.m[id].(*omap)
		if !ok {
			continue
		}
		copied := false
		for _, dec := range body.keys {
			args, ok := body.m[dec].([]any)
			if !ok || strings.HasPrefix(dec, "_") {
				continue
			}
			found := false
			for _, a := range args {
				if m, ok := a.(map[string]any); ok && len(m) > 0 && first(m) == "order" {
					found = true
				}
			}
			if !found {
				if !copied {
					body = body.clone()
					ids.m[id] = body
					copied = true
				}
				body.m[dec] = appendCopy(args, map[string]any{"order": next + n})
				n++
			}
		}
	}
	return n
}

// handleStateDecls is _handle_state_decls: the short form "id: mod.fun",
// "mod.fun:" keys split into "mod: [..., fun]", __sls__ and __env__.
func handleStateDecls(st *highData, name, env string, loc func(id, msg string) Error, errs *[]Error) {
	for _, id := range st.ids.keys {
		body, ok := st.ids.m[id].(*omap)
		if !ok {
			if s, ok := st.ids.m[id].(string); ok && strings.Contains(s, ".") {
				comps := strings.Split(s, ".")
				b := newOmap()
				b.set("__sls__", name)
				b.set("__env__", env)
				b.set(comps[0], []any{comps[1]})
				st.ids.m[id] = b
				continue
			}
			*errs = append(*errs, loc(id, fmt.Sprintf("ID %s in SLS %s is not a dictionary", id, name)))
			continue
		}
		skeys := map[string]bool{}
		for _, key := range body.list() {
			if strings.HasPrefix(key, "_") {
				continue
			}
			args, ok := body.m[key].([]any)
			if !ok {
				continue
			}
			if strings.Contains(key, ".") {
				comps := strings.Split(key, ".")
				if skeys[comps[0]] {
					*errs = append(*errs, loc(id, fmt.Sprintf("ID '%s' in SLS '%s' contains multiple state declarations of the same type", id, name)))
					continue
				}
				body.del(key)
				body.set(comps[0], appendCopy(args, comps[1]))
				skeys[comps[0]] = true
				continue
			}
			skeys[key] = true
		}
		if !body.has("__sls__") {
			body.set("__sls__", name)
		}
		if !body.has("__env__") {
			body.set("__env__", env)
		}
	}
}

// handleExtend is _handle_extend.
func handleExtend(st *highData, name, env string, loc func(id, msg string) Error, errs *[]Error) {
	raw, ok := st.ids.del("extend")
	if !ok {
		return
	}
	ext, ok := raw.(*omap)
	if !ok {
		*errs = append(*errs, loc("extend", fmt.Sprintf("Extension value in SLS '%s' is not a dictionary", name)))
		return
	}
	for _, id := range ext.keys {
		var body *omap
		switch b := ext.m[id].(type) {
		case map[string]any:
			body = fromMap(b, nil)
			ext.m[id] = body
		case *omap:
			body = b
		default:
			*errs = append(*errs, loc("extend", fmt.Sprintf("Extension name '%s' in SLS '%s' is not a dictionary", id, name)))
			continue
		}
		if !body.has("__sls__") {
			body.set("__sls__", name)
		}
		if !body.has("__env__") {
			body.set("__env__", env)
		}
		for _, key := range body.list() {
			if strings.HasPrefix(key, "_") {
				continue
			}
			args, ok := body.m[key].([]any)
			if !ok || !strings.Contains(key, ".") {
				continue
			}
			comps := strings.Split(key, ".")
			body.del(key)
			body.set(comps[0], appendCopy(args, comps[1]))
		}
	}
	st.extend = append(st.extend, ext)
}

// handleExclude is _handle_exclude.
func handleExclude(st *highData, name string, loc func(id, msg string) Error, errs *[]Error) {
	raw, ok := st.ids.del("exclude")
	if !ok {
		return
	}
	l, ok := raw.([]any)
	if !ok {
		*errs = append(*errs, loc("exclude", fmt.Sprintf("Exclude Declaration in SLS %s is not formed as a list", name)))
		return
	}
	st.exclude = append(st.exclude, l...)
}
