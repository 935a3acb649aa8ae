package state

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/state"
)

// The engine applies a low state the way Salt 3006's State.call_chunks
// does (salt/state.py): chunks run in their order; a chunk's requisites
// run first (check_requisite, call_chunk); a prereq runs its target with
// test=True first; watch calls the module's mod_watch when a watched state
// changed; listen calls mod_watch at the end of the run (call_listen);
// failhard stops the run; unless/onlyif/creates and check_cmd decide or
// overrule a state's result (_run_check, _run_check_cmd); parallel: True
// runs a state in its own goroutine (call_parallel, reconcile_procs).
// The return is Salt's running dict, keyed by state.Tag.

// Options are what a run needs besides the chunks.
type Options struct {
	// Test is test=True: every state function runs with Call.Test.
	Test bool
	// Failhard is the global failhard option.
	Failhard bool
	// StateEvents fires salt/job/<jid>/prog/<id>/<run_num> after every
	// state (state_events), through Host.Fire.
	StateEvents bool
	// Local is a masterless run (salt-call --local): no events at all, as
	// in Salt's State.event.
	Local bool
	// JID is the job's id, for events.
	JID string
	// Parallel bounds the states with parallel: True that run at once;
	// 0 means 8.
	Parallel int
	// DisabledRequisites is Salt's disabled_requisites: requisite kinds
	// that are ignored.
	DisabledRequisites []string
}

// Requisite kinds, in the order Salt's check_requisite reads them.
var requisiteKinds = strings.Fields("require require_any watch watch_any prereq onfail onfail_any onfail_all onchanges onchanges_any")

// internalKeys is Salt's STATE_INTERNAL_KEYWORDS (salt/state.py): the
// chunk's keys that the state system reads and a state function does not
// get as arguments.
var internalKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`onchanges onchanges_any onfail onfail_any onfail_all onfail_stop prereq
		prerequired watch watch_any require require_any listen onchanges_in onfail_in prereq_in watch_in
		require_in listen_in fun state check_cmd cmd_opts_exclude failhard onlyif unless creates retry order
		parallel prereq_in reload_modules reload_grains reload_pillar runas runas_password fire_event saltenv
		umask use use_in __env__ __sls__ __id__ __orchestration_jid__ __pub_user __pub_arg __pub_jid __pub_fun
		__pub_tgt __pub_ret __pub_pid __pub_tgt_type __prereq__ __prerequired__ __umask__`) {
		internalKeys[k] = true
	}
}

// Kwargs returns the arguments a state function gets from its chunk: every
// key but the state system's own (Salt's format_call with
// STATE_INTERNAL_KEYWORDS) and the engine's "__" keys (__files__ stays:
// it is the function's data). The map is new; its values are the chunk's.
func Kwargs(c state.Chunk) map[string]any {
	out := make(map[string]any, len(c))
	for k, v := range c {
		if internalKeys[k] || (strings.HasPrefix(k, "__") && k != "__files__" && k != "__files_missing__" && k != "__dirs__") {
			continue
		}
		out[k] = v
	}
	return out
}

// Run applies low in order and returns Salt's return: one entry per
// state, keyed by state.Tag. It stops between states when ctx ends and
// then returns ctx's error with what ran so far.
func Run(ctx context.Context, h Host, low []state.Chunk, o Options) (map[string]any, error) {
	r := newRun(h, low, o)
	ret := r.callChunks(ctx, r.chunks)
	if ctx.Err() == nil {
		ret = r.callListen(ctx, ret)
	}
	out := make(map[string]any, len(ret))
	for tag, v := range ret {
		out[tag] = map[string]any(v)
	}
	return out, ctx.Err()
}

// runState is one state run: Salt's State instance during call_chunks.
type run struct {
	h      Host
	o      Options
	chunks []state.Chunk
	pre    map[string]ret // results of prereq test runs
	active map[string]bool
	runNum int
	// failhard is Salt's running["__FAILHARD__"].
	failhard bool
	procs    map[string]*proc // parallel states not yet reconciled
	slots    chan struct{}
	disabled map[string]bool
}

// ret is one state's return, as Salt's dict.
type ret map[string]any

// proc is a parallel state running in its own goroutine.
type proc struct {
	done chan struct{}
	ret  ret
}

func newRun(h Host, low []state.Chunk, o Options) *run {
	n := o.Parallel
	if n <= 0 {
		n = 8
	}
	r := &run{h: h, o: o, pre: map[string]ret{}, active: map[string]bool{},
		procs: map[string]*proc{}, slots: make(chan struct{}, n), disabled: map[string]bool{}}
	for _, d := range o.DisabledRequisites {
		r.disabled[d] = true
	}
	// The engine marks chunks (__prereq__, watch turned require) as Salt
	// does: work on copies, never on the job's data.
	r.chunks = make([]state.Chunk, len(low))
	for i, c := range low {
		cc := make(state.Chunk, len(c)+2)
		for k, v := range c {
			cc[k] = v
		}
		r.chunks[i] = cc
	}
	addPrerequired(r.chunks)
	return r
}

// addPrerequired gives every state a prereq names its "prerequired"
// requisite back, as Salt's requisite_in does at compile time; a compiler
// that already did it is not repeated.
func addPrerequired(chunks []state.Chunk) {
	for _, c := range chunks {
		for _, req := range reqList(c["prereq"]) {
			key, val, ok := reqKV(req)
			if !ok {
				continue
			}
			back := map[string]any{c.State(): c.ID()}
			for _, t := range chunks {
				if !reqMatches(key, val, t) {
					continue
				}
				if hasReq(t["prerequired"], c.State(), c.ID()) {
					continue
				}
				t["prerequired"] = append(append([]any(nil), reqList(t["prerequired"])...), back)
			}
		}
	}
}

func hasReq(v any, key, val string) bool {
	for _, r := range reqList(v) {
		if k, x, ok := reqKV(r); ok && k == key && x == val {
			return true
		}
	}
	return false
}

// reqList reads a requisite's value: a list, or one item.
func reqList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	case []map[string]any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = m
		}
		return out
	}
	return []any{v}
}

// reqKV reads one requisite, {module: id-or-name} or a bare id (Salt's
// {"id": req}), with Salt's trim_req ("file.managed" is "file"). ok is false
// for a value that is not a requisite; val "" with ok true is None.
func reqKV(req any) (key, val string, ok bool) {
	switch x := req.(type) {
	case string:
		return "id", x, true
	case map[string]any:
		if len(x) != 1 {
			return "", "", false
		}
		for k, v := range x {
			if i := strings.IndexByte(k, '.'); i >= 0 {
				k = k[:i]
			}
			switch s := v.(type) {
			case nil:
				return k, "", true
			case string:
				return k, s, true
			case int, int64, uint64, float64, bool:
				return k, fmt.Sprint(s), true
			}
			return k, "", false
		}
	}
	return "", "", false
}

// reqMatches is Salt's match of one requisite against a chunk: sls by the
// SLS name, else the name or the ID (globs allowed) and the module (any,
// for "id").
func reqMatches(key, val string, c state.Chunk) bool {
	if val == "" {
		return false
	}
	if key == "sls" {
		return fnmatch(c.SLS(), val)
	}
	if !fnmatch(c.Name(), val) && !fnmatch(c.ID(), val) {
		return false
	}
	return key == "id" || c.State() == key
}

// nowStart is Salt's start_time: local time of day with microseconds.
func nowStart(t time.Time) string { return t.Format("15:04:05.000000") }

func durationMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// fake is Salt's _calculate_fake_duration for states that did not run.
func fake(r ret) ret {
	r["start_time"] = nowStart(time.Now())
	r["duration"] = 0.0
	return r
}

func (r *run) stamp(x ret, low state.Chunk) ret {
	x["__run_num__"] = r.runNum
	r.runNum++
	for _, k := range []string{"__sls__", "__id__", "name"} {
		x[k] = low[k]
	}
	return x
}

// callChunks is Salt's State.call_chunks.
func (r *run) callChunks(ctx context.Context, chunks []state.Chunk) map[string]ret {
	running := map[string]ret{}
	for _, low := range chunks {
		if r.failhard || ctx.Err() != nil {
			break
		}
		tag := state.Tag(low)
		if _, done := running[tag]; !done {
			r.callChunk(ctx, low, running, 0)
			if r.checkFailhard(low, running) {
				break
			}
		}
		r.active = map[string]bool{}
	}
	r.failhard = false
	r.reconcile(running, nil, true)
	return running
}

// checkFailhard is Salt's check_failhard: the chunk's failhard (or the
// global one) and a False result, never under test.
func (r *run) checkFailhard(low state.Chunk, running map[string]ret) bool {
	if r.o.Test {
		return false
	}
	fh, set := low["failhard"]
	if !set {
		fh = r.o.Failhard
	}
	x, ok := running[state.Tag(low)]
	if !state.Truthy(fh) || !ok {
		return false
	}
	r.reconcile(running, []string{state.Tag(low)}, true)
	return x["result"] == false
}

// reconcile is Salt's reconcile_procs: parallel states that finished (or,
// with wait, all of tags; nil tags: all) have their return put in running.
func (r *run) reconcile(running map[string]ret, tags []string, wait bool) {
	if tags == nil {
		for t := range r.procs {
			tags = append(tags, t)
		}
	}
	for _, t := range tags {
		p, ok := r.procs[t]
		if !ok {
			continue
		}
		if wait {
			<-p.done
		} else {
			select {
			case <-p.done:
			default:
				continue
			}
		}
		if x, ok := running[t]; ok {
			delete(x, "proc")
			for k, v := range p.ret {
				x[k] = v
			}
		}
		delete(r.procs, t)
	}
}

// status is check_requisite's verdict.
type status string

// checkRequisite is Salt's State.check_requisite.
func (r *run) checkRequisite(low state.Chunk, running map[string]ret, pre bool) (status, map[string][]state.Chunk, string) {
	_, hasWatch := LookupWatch(low.State())
	present := false
	for _, w := range [][2]string{{"watch", "require"}, {"watch_any", "require_any"}} {
		if _, ok := low[w[0]]; !ok {
			continue
		}
		if hasWatch {
			present = true
			continue
		}
		low[w[1]] = append(append([]any(nil), reqList(low[w[1]])...), reqList(low[w[0]])...)
		delete(low, w[0])
	}
	for _, k := range []string{"require", "require_any", "prerequired", "prereq", "onfail", "onfail_any", "onfail_all", "onchanges", "onchanges_any"} {
		if _, ok := low[k]; ok {
			present = true
		}
	}
	if !present {
		return "met", nil, ""
	}
	r.reconcile(running, nil, false)
	kinds := requisiteKinds
	if pre {
		kinds = append(append([]string(nil), kinds...), "prerequired")
	}
	reqs := map[string][]state.Chunk{}
	for _, kind := range kinds {
		v, ok := low[kind]
		if !ok || v == nil || r.disabled[kind] {
			continue
		}
		for _, req := range reqList(v) {
			key, val, ok := reqKV(req)
			if !ok {
				// Salt raises SaltRenderError here; the state fails.
				return "error", nil, fmt.Sprintf("Could not locate requisite of [%v] present in state with name [%s]", req, low.Name())
			}
			if val == "" {
				continue
			}
			found := false
			for _, c := range r.chunks {
				if reqMatches(key, val, c) {
					found = true
					reqs[kind] = append(reqs[kind], c)
				}
			}
			if !found {
				return "unmet", nil, ""
			}
		}
	}
	stats := map[string]bool{}
	for _, kind := range kinds {
		chunks := reqs[kind]
		if len(chunks) == 0 {
			continue
		}
		dict := running
		if strings.HasPrefix(kind, "prereq") && kind != "prerequired" {
			dict = r.pre
		} else {
			tags := make([]string, 0, len(chunks))
			for _, c := range chunks {
				tags = append(tags, state.Tag(c))
			}
			r.reconcile(running, tags, true)
		}
		rs := map[string]bool{}
		for _, c := range chunks {
			x, ok := dict[state.Tag(c)]
			if !ok {
				rs["unmet"] = true
				continue
			}
			res := x["result"]
			if strings.HasPrefix(kind, "onfail") {
				if res == true {
					rs["onfail"] = true
					continue
				}
			} else if res == false {
				rs["fail"] = true
				continue
			}
			if strings.HasPrefix(kind, "onchanges") {
				if !state.Truthy(x["changes"]) {
					rs["onchanges"] = true
				} else {
					rs["onchangesmet"] = true
				}
				continue
			}
			if strings.HasPrefix(kind, "watch") && state.Truthy(x["changes"]) {
				rs["change"] = true
				continue
			}
			isPre := strings.HasPrefix(kind, "prereq")
			if isPre && res == nil && kind != "prerequired" {
				rs["premet"] = true
			}
			if isPre && res != nil {
				if kind != "prerequired" {
					rs["pre"] = true
				}
			} else if ran, ok := x["__state_ran__"]; !ok || ran != false {
				rs["met"] = true
			}
		}
		if strings.HasSuffix(kind, "_any") || kind == "onfail" {
			if rs["met"] || rs["change"] {
				delete(rs, "fail")
			}
			if rs["onchangesmet"] {
				delete(rs, "onchanges")
				delete(rs, "fail")
			}
			if rs["onfail"] && rs["met"] {
				delete(rs, "onfail")
			}
		}
		if strings.HasSuffix(kind, "_all") && rs["onfail"] {
			delete(rs, "met")
		}
		for k := range rs {
			stats[k] = true
		}
	}
	switch {
	case stats["unmet"]:
		return "unmet", reqs, ""
	case stats["fail"]:
		return "fail", reqs, ""
	case stats["pre"]:
		if stats["premet"] {
			return "met", reqs, ""
		}
		return "pre", reqs, ""
	case stats["onfail"] && !stats["onchangesmet"]:
		return "onfail", reqs, ""
	case stats["onchanges"] && !stats["onchangesmet"]:
		return "onchanges", reqs, ""
	case stats["change"]:
		return "change", reqs, ""
	case stats["onfail"]:
		return "onfail", reqs, ""
	}
	return "met", reqs, ""
}

// callChunk is Salt's State.call_chunk.
func (r *run) callChunk(ctx context.Context, low state.Chunk, running map[string]ret, depth int) {
	tag := state.Tag(low)
	if !state.Truthy(low["prerequired"]) {
		r.active[tag] = true
	}
	isPrereq := state.Truthy(low["__prereq__"])
	st, reqs, errMsg := r.checkRequisite(low, running, !isPrereq)
	switch {
	case st == "error":
		running[tag] = r.stamp(fake(ret{"changes": map[string]any{}, "result": false, "comment": errMsg}), low)
	case st == "unmet":
		if !r.runUnmet(ctx, low, running, depth) {
			return
		}
	case st == "met":
		if isPrereq {
			r.pre[tag] = r.call(ctx, low, running)
		} else {
			running[tag] = r.call(ctx, low, running)
		}
	case st == "fail":
		if p, ok := r.pre[tag]; ok {
			// The prereq test run of this state, whose requisite failed:
			// its changes were only proposed.
			if state.Truthy(p["changes"]) {
				p["changes"] = map[string]any{}
			}
			running[tag] = r.stamp(p, low)
		} else {
			failed := map[string]bool{}
			for _, cs := range reqs {
				for _, c := range cs {
					ct := state.Tag(c)
					x, ok := r.pre[ct]
					if !ok {
						x, ok = running[ct]
					}
					if ok && x["result"] == false {
						failed[c.SLS()+"."+c.ID()] = true
					}
				}
			}
			names := make([]string, 0, len(failed))
			for k := range failed {
				names = append(names, k)
			}
			sort.Strings(names)
			x := r.stamp(fake(ret{"changes": map[string]any{}, "result": false,
				"comment": "One or more requisite failed: " + strings.Join(names, ", ")}), low)
			running[tag] = x
			r.pre[tag] = x
		}
	case st == "change" && !isPrereq:
		x := r.call(ctx, low, running)
		if !state.Truthy(x["changes"]) && !state.Truthy(x["skip_watch"]) {
			mw := make(state.Chunk, len(low)+2)
			for k, v := range low {
				mw[k] = v
			}
			mw["sfun"] = low["fun"]
			mw["fun"] = "mod_watch"
			watched := map[string]map[string]any{}
			for _, kind := range []string{"watch", "watch_any"} {
				for _, c := range reqs[kind] {
					if y, ok := running[state.Tag(c)]; ok {
						ch, _ := y["changes"].(map[string]any)
						watched[state.Tag(c)] = ch
					}
				}
			}
			x = r.callWatch(ctx, mw, watched)
		}
		running[tag] = x
	case st == "pre":
		x := r.stamp(fake(ret{"changes": map[string]any{}, "result": true, "comment": "No changes detected"}), low)
		running[tag] = x
		r.pre[tag] = x
	case st == "onfail":
		running[tag] = r.stamp(fake(ret{"changes": map[string]any{}, "result": true,
			"comment": "State was not run because onfail req did not change", "__state_ran__": false}), low)
	case st == "onchanges":
		running[tag] = r.stamp(fake(ret{"changes": map[string]any{}, "result": true,
			"comment": "State was not run because none of the onchanges reqs changed", "__state_ran__": false}), low)
	default:
		if isPrereq {
			r.pre[tag] = r.call(ctx, low, running)
		} else {
			running[tag] = r.call(ctx, low, running)
		}
	}
	if x, ok := running[tag]; ok {
		r.event(x, low)
	}
}

// runUnmet is the "unmet" branch of Salt's call_chunk: requisites that are
// not found fail the state; those not run yet run first, then the state is
// looked at again. It reports whether callChunk should go on to its event.
func (r *run) runUnmet(ctx context.Context, low state.Chunk, running map[string]ret, depth int) bool {
	tag := state.Tag(low)
	kinds := append(append([]string(nil), requisiteKinds...), "prerequired")
	if state.Truthy(low["__prereq__"]) {
		kinds = kinds[:len(kinds)-1]
	}
	var lost []string
	lostBy := map[string][]string{}
	var reqs []state.Chunk
	for _, kind := range kinds {
		for _, req := range reqList(low[kind]) {
			key, val, ok := reqKV(req)
			if !ok || val == "" {
				continue
			}
			found := false
			for _, c := range r.chunks {
				if !reqMatches(key, val, c) {
					continue
				}
				if kind == "prereq" {
					c["__prereq__"] = true
				} else if kind == "prerequired" && key != "sls" {
					c["__prerequired__"] = true
				}
				reqs = append(reqs, c)
				found = true
			}
			if !found {
				if len(lostBy[kind]) == 0 {
					lost = append(lost, kind)
				}
				lostBy[kind] = append(lostBy[kind], key+": "+val)
			}
		}
	}
	if len(lost) > 0 {
		var b strings.Builder
		b.WriteString("The following requisites were not found:\n")
		// Salt lists them in its own order of requisite kinds.
		for _, kind := range kinds {
			if len(lostBy[kind]) == 0 {
				continue
			}
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat(" ", 19), kind)
			for _, l := range lostBy[kind] {
				fmt.Fprintf(&b, "%s%s\n", strings.Repeat(" ", 23), l)
			}
		}
		x := r.stamp(fake(ret{"changes": map[string]any{}, "result": false, "comment": b.String()}), low)
		if state.Truthy(low["__prereq__"]) {
			r.pre[tag] = x
		} else {
			running[tag] = x
		}
		r.event(x, low)
		return false
	}
	var last state.Chunk = low
	for _, c := range reqs {
		last = c
		ct := state.Tag(c)
		if _, done := running[ct]; done {
			continue
		}
		if ctx.Err() != nil {
			return false
		}
		if r.active[ct] {
			if state.Truthy(c["__prerequired__"]) {
				// A prereq that runs back into its own state: the state
				// runs its test=True pass (Salt stores it under ct).
				if _, ok := r.pre[tag]; !ok {
					low["__prereq__"] = true
					r.pre[ct] = r.call(ctx, low, running)
				}
				return false
			}
			running[tag] = r.stamp(ret{"changes": map[string]any{}, "result": false, "comment": "Recursive requisite found"}, low)
			r.event(running[tag], low)
			return false
		}
		r.callChunk(ctx, c, running, 0)
		if r.checkFailhard(c, running) {
			r.failhard = true
			return false
		}
	}
	if state.Truthy(low["__prereq__"]) {
		st, _, _ := r.checkRequisite(low, running, false)
		x := r.call(ctx, low, running)
		if !state.Truthy(x["changes"]) && st == "change" {
			x["changes"] = map[string]any{"watch": "watch"}
			x["result"] = nil
		}
		r.pre[tag] = x
	} else {
		depth++
		if depth >= 20 {
			running[tag] = r.stamp(ret{"changes": map[string]any{}, "result": false, "comment": "Recursive requisite found"}, low)
		} else {
			r.callChunk(ctx, low, running, depth)
			// callChunk fired the state's event already.
			if r.checkFailhard(last, running) {
				r.failhard = true
			}
			return false
		}
	}
	if r.checkFailhard(last, running) {
		r.failhard = true
		return false
	}
	return true
}

// event is Salt's State.event: with state_events, or the state's
// fire_event, an event per state.
func (r *run) event(x ret, low state.Chunk) {
	if r.o.Local || r.h == nil {
		return
	}
	fe := low["fire_event"]
	if !r.o.StateEvents && !state.Truthy(fe) {
		return
	}
	data := map[string]any{"ret": copyRet(x)}
	var tag string
	switch v := fe.(type) {
	case bool:
		if v {
			tag = fmt.Sprintf("salt/state_result/%s/%s/%v", r.o.JID, r.h.ID(), x["name"])
		}
	case string:
		if v != "" {
			tag = fmt.Sprintf("salt/state_result/%s/%s/%s", r.o.JID, r.h.ID(), v)
		}
	}
	if tag == "" {
		tag = fmt.Sprintf("salt/job/%s/prog/%s/%v", r.o.JID, r.h.ID(), x["__run_num__"])
		data["len"] = len(r.chunks)
	}
	r.h.Fire(tag, data)
}

func copyRet(x ret) map[string]any {
	out := make(map[string]any, len(x))
	for k, v := range x {
		if k != "proc" {
			out[k] = v
		}
	}
	return out
}

// verify is Salt's State.verify_data for one chunk at run time.
func verify(low state.Chunk, fun string) []string {
	var errs []string
	for _, k := range []string{"state", "fun", "name"} {
		if _, ok := low[k]; !ok {
			errs = append(errs, fmt.Sprintf("Missing %q data", k))
		}
	}
	if n, ok := low["name"]; ok && state.Truthy(n) {
		if _, isStr := n.(string); !isStr {
			in := ""
			if _, ok := low["__sls__"]; ok {
				in = fmt.Sprintf("in SLS '%s' ", low.SLS())
			}
			errs = append(errs, fmt.Sprintf("ID '%v' %sis not formed as a string, but is a %s", n, in, pyType(n)))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	full := low.State() + "." + fun
	found := false
	if fun == "mod_watch" {
		_, found = LookupWatch(low.State())
	} else {
		_, found = Lookup(full)
	}
	if !found {
		if _, ok := low["__sls__"]; ok {
			errs = append(errs, fmt.Sprintf("State '%s' was not found in SLS '%s'", full, low.SLS()))
		} else {
			errs = append(errs, fmt.Sprintf("Specified state '%s' was not found", full))
		}
	}
	return errs
}

func pyType(v any) string {
	switch v.(type) {
	case bool:
		return "bool"
	case int, int64, uint64:
		return "int"
	case float64:
		return "float"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// call is Salt's State.call for one chunk: verify it, run unless/onlyif/
// creates, the function (in a goroutine when parallel), check_cmd, and add
// __run_num__, start_time and duration.
func (r *run) call(ctx context.Context, low state.Chunk, running map[string]ret) ret {
	return r.callFun(ctx, low, nil)
}

// callWatch calls the module's mod_watch for low (whose "fun" is
// mod_watch and "sfun" the function).
func (r *run) callWatch(ctx context.Context, low state.Chunk, watched map[string]map[string]any) ret {
	return r.callFun(ctx, low, watched)
}

func (r *run) callFun(ctx context.Context, low state.Chunk, watched map[string]map[string]any) ret {
	start := time.Now()
	fun := low.Fun()
	if errs := verify(low, fun); len(errs) > 0 {
		var b strings.Builder
		for _, e := range errs {
			b.WriteString(e + "\n")
		}
		x := ret{"result": false, "name": low["name"], "changes": map[string]any{}, "comment": b.String()}
		x["__run_num__"] = r.runNum
		x["__sls__"], x["__id__"] = low["__sls__"], low["__id__"]
		r.runNum++
		return x
	}
	var f Func
	var ownCheck bool
	if fun == "mod_watch" {
		f, _ = LookupWatch(low.State())
	} else {
		m, _ := Lookup(low.State() + "." + fun)
		f, ownCheck = m.Run, m.RunCheck
	}
	prereq := state.Truthy(low["__prereq__"])
	c := &Call{Chunk: low, Name: low.Name(), Test: r.o.Test || prereq, Host: r.h, Watched: watched}

	x := ret{"result": false, "name": low["name"], "changes": map[string]any{}}
	if !ownCheck && hasAny(low, "unless", "onlyif", "creates") {
		r.runCheck(ctx, low, x)
	}
	if x["result"] == false {
		if !prereq && state.Truthy(low["parallel"]) {
			x = r.startParallel(ctx, f, c)
		} else {
			x = invoke(ctx, f, c)
		}
	}
	if cc, ok := low["check_cmd"]; ok {
		r.runCheckCmd(ctx, cc, low, x)
	}
	if prereq {
		delete(low, "__prereq__")
		return x
	}
	x["__sls__"] = low["__sls__"]
	x["__run_num__"] = r.runNum
	r.runNum++
	x["start_time"] = nowStart(start)
	x["duration"] = durationMS(time.Since(start))
	x["__id__"] = low["__id__"]
	return x
}

// invoke runs a state function; a panic fails the state, as an exception
// does in Salt's State.call.
func invoke(ctx context.Context, f Func, c *Call) (x ret) {
	defer func() {
		if p := recover(); p != nil {
			x = ret{"result": false, "name": c.Name, "changes": map[string]any{},
				"comment": fmt.Sprintf("An exception occurred in this state: panic: %v\n%s", p, debug.Stack())}
		}
	}()
	out := f(ctx, c)
	name := out.Name
	if name == "" {
		name = c.Name
	}
	changes := out.Changes
	if changes == nil {
		changes = map[string]any{}
	}
	return ret{"name": name, "result": out.Result.Value(), "comment": out.Comment, "changes": changes}
}

// startParallel is Salt's call_parallel: the state runs in a goroutine
// (at most Options.Parallel at once) and its place holds "Started in a
// separate process" until reconcile.
func (r *run) startParallel(ctx context.Context, f Func, c *Call) ret {
	tag := state.Tag(c.Chunk)
	p := &proc{done: make(chan struct{})}
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return ret{"name": c.Name, "result": false, "changes": map[string]any{}, "comment": "Parallel process failed to return"}
	}
	r.procs[tag] = p
	go func() {
		defer func() { <-r.slots; close(p.done) }()
		start := time.Now()
		x := invoke(ctx, f, c)
		x["start_time"] = nowStart(start)
		x["duration"] = durationMS(time.Since(start))
		x["__parallel__"] = true
		p.ret = x
	}()
	return ret{"name": c.Name, "result": nil, "changes": map[string]any{}, "comment": "Started in a separate process", "proc": true}
}

// callListen is Salt's State.call_listen: states that listen to a state
// that changed get their module's mod_watch, once, at the end of the run.
func (r *run) callListen(ctx context.Context, running map[string]ret) map[string]ret {
	type cref struct{ state, id, name string }
	var crefs []cref
	byRef := map[cref]state.Chunk{}
	type listener struct {
		key cref
		val []any
	}
	var listeners []listener
	for _, c := range r.chunks {
		k := cref{c.State(), c.ID(), c.Name()}
		if _, dup := byRef[k]; !dup {
			crefs = append(crefs, k)
		}
		byRef[k] = c
		if v, ok := c["listen"]; ok {
			listeners = append(listeners, listener{k, reqList(v)})
		}
		for _, lin := range reqList(c["listen_in"]) {
			m, ok := lin.(map[string]any)
			if !ok {
				continue
			}
			for key, val := range m {
				listeners = append(listeners, listener{cref{key, fmt.Sprint(val), "lookup"}, []any{map[string]any{c.State(): c.ID()}}})
			}
		}
	}
	in := func(v string, c cref) bool { return v == c.state || v == c.id || v == c.name }
	errs := map[string]ret{}
	lerr := func(key, val string) {
		tag := fmt.Sprintf("Listen_Error_|-listen_%s_|-listen_%s_|-Listen_Error", val, key)
		errs[tag] = ret{"comment": fmt.Sprintf("Referenced state %s: %s does not exist", key, val),
			"name": fmt.Sprintf("listen_%s:%s", key, val), "result": false, "changes": map[string]any{}}
	}
	var watchers []state.Chunk
	for _, l := range listeners {
		for _, to := range l.val {
			m, isMap := to.(map[string]any)
			if !isMap {
				s := fmt.Sprint(to)
				found := false
				for _, c := range r.chunks {
					if c.ID() == s || c.Name() == s {
						m = map[string]any{c.State(): c.ID()}
						found = true
					}
				}
				if !found {
					continue
				}
			}
			for lkey, lv := range m {
				lval := fmt.Sprint(lv)
				var toTags []string
				for _, c := range crefs {
					if lkey == c.state && in(lval, c) {
						toTags = append(toTags, state.Tag(byRef[c]))
					}
				}
				if len(toTags) == 0 {
					lerr(lkey, lval)
					continue
				}
				for _, tt := range toTags {
					x, ok := running[tt]
					if !ok || !state.Truthy(x["changes"]) {
						continue
					}
					var news []state.Chunk
					for _, c := range crefs {
						if l.key.state == c.state && in(l.key.id, c) {
							news = append(news, byRef[c])
						}
					}
					if len(news) == 0 {
						lerr(l.key.state, l.key.id)
						continue
					}
					for _, c := range news {
						w := make(state.Chunk, len(c))
						for k, v := range c {
							if k == "listen_in" || isRequisite(k) {
								continue
							}
							w[k] = v
						}
						w["sfun"] = c["fun"]
						w["fun"] = "mod_watch"
						w["__id__"] = "listener_" + c.ID()
						watchers = append(watchers, w)
					}
				}
			}
		}
	}
	if len(watchers) > 0 {
		for tag, x := range r.callChunks(ctx, watchers) {
			running[tag] = x
		}
	}
	tags := make([]string, 0, len(errs))
	for t := range errs {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		errs[t]["__run_num__"] = r.runNum
		r.runNum++
		running[t] = errs[t]
	}
	return running
}

// isRequisite is Salt's STATE_REQUISITE_KEYWORDS.
func isRequisite(k string) bool {
	switch k {
	case "onchanges", "onchanges_any", "onfail", "onfail_any", "onfail_all", "onfail_stop", "prereq",
		"prerequired", "watch", "watch_any", "require", "require_any", "listen":
		return true
	}
	return false
}
