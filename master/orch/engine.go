package orch

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/state"
)

// Master is what the orchestrate states need of the master.
type Master interface {
	// Expected lists the accepted minions tgt matches, and whether each
	// is connected now.
	Expected(tgt, tgtType string) (minions []string, connected map[string]bool, err error)
	// Cmd publishes req through the master's publish path (signing,
	// compiling states, the job cache, relays) and calls ret with each
	// return (Salt's return dict) until every minion returned or the
	// job's timeout (req.Timeout, else the master's) passed. It returns
	// the job's id and the minions it was sent to.
	Cmd(ctx context.Context, req *api.Request, ret func(data map[string]any)) (jid string, minions []string, err error)
	// Runner and Wheel call the master's runner and wheel functions,
	// firing salt/run|wheel/<jid>/new and /ret.
	Runner(ctx context.Context, fun string, arg []any, kwarg map[string]any, user string) (jid string, res any, err error)
	Wheel(ctx context.Context, fun string, arg []any, kwarg map[string]any, user string) (jid string, res any, err error)
	// Subscribe and Fire use the master's event bus.
	Subscribe(pattern string) *event.Subscription
	Fire(tag string, data map[string]any)
}

// Options are an orchestration's settings.
type Options struct {
	// Test is test=True: the steps say what they would do; salt.state
	// runs its states with test=True on the minions.
	Test bool
	// Failhard is the master's failhard option: any failed step stops
	// the orchestration (a step's own failhard: True does it for that
	// step).
	Failhard bool
	// JID is the orchestration's job id (Salt's orchestration_jid).
	JID string
	// User is the user the jobs, runners and wheel calls run as.
	User string
	// OnStep, when set, is told each step's result as it ends (n of
	// total steps): the runner's progress.
	OnStep func(n, total int, tag string, r map[string]any)
}

// Func is one orchestrate state function.
type Func func(ctx context.Context, x *Exec, c state.Chunk) map[string]any

// funcs are the state functions, by "module.function".
var funcs = map[string]Func{}

func register(name string, f Func) { funcs[name] = f }

// Functions lists the state functions orchestrate runs.
func Functions() []string {
	out := make([]string, 0, len(funcs))
	for k := range funcs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Exec is one orchestration run, as the state functions see it.
type Exec struct {
	M Master
	O Options
}

// requisiteKinds are the requisite kinds the engine checks, in the order
// Salt's check_requisite reads them (prereq aside).
var requisiteKinds = []string{"require", "require_any", "watch", "watch_any", "onfail", "onfail_any", "onfail_all", "onchanges", "onchanges_any"}

// unsupported are chunk keys the engine does not do: the step fails
// rather than run differently from Salt.
var unsupported = []string{"prereq", "prereq_in", "prerequired", "listen", "listen_in", "parallel"}

// Apply runs low (ordered by package state's Order, checked by
// state.Check) and returns Salt's running dict keyed by state.Tag. It
// stops between steps when ctx ends and returns ctx's error with what ran.
func Apply(ctx context.Context, m Master, low []state.Chunk, o Options) (map[string]any, error) {
	x := &Exec{M: m, O: o}
	running := map[string]map[string]any{}
	runNum := 0
	seq := state.Sequence(low)
	for _, i := range seq {
		if ctx.Err() != nil {
			break
		}
		c := low[i]
		tag := state.Tag(c)
		start := time.Now()
		r := x.step(ctx, low, c, running)
		r["__run_num__"] = runNum
		runNum++
		r["__sls__"], r["__id__"] = c["__sls__"], c["__id__"]
		if _, ok := r["name"]; !ok {
			r["name"] = c["name"]
		}
		if _, ok := r["start_time"]; !ok {
			r["start_time"] = start.Format("15:04:05.000000")
			r["duration"] = float64(time.Since(start).Microseconds()) / 1000
		}
		running[tag] = r
		if o.OnStep != nil {
			o.OnStep(runNum, len(seq), tag, r)
		}
		if failhard(c, o) && r["result"] == false {
			break
		}
	}
	out := make(map[string]any, len(running))
	for k, v := range running {
		out[k] = v
	}
	return out, ctx.Err()
}

// failhard is Salt's check_failhard: the chunk's failhard, else the
// global one; never under test.
func failhard(c state.Chunk, o Options) bool {
	if o.Test {
		return false
	}
	if v, ok := c["failhard"]; ok {
		return state.Truthy(v)
	}
	return o.Failhard
}

func notRun(comment string) map[string]any {
	return map[string]any{"changes": map[string]any{}, "result": true, "comment": comment, "__state_ran__": false, "duration": 0.0,
		"start_time": time.Now().Format("15:04:05.000000")}
}

// step is Salt's call_chunk for one chunk whose requisites already ran.
func (x *Exec) step(ctx context.Context, low []state.Chunk, c state.Chunk, running map[string]map[string]any) map[string]any {
	for _, k := range unsupported {
		if _, ok := c[k]; ok {
			return failed(c, fmt.Sprintf("%s is not supported in an orchestration on Halite's master", k))
		}
	}
	fun := c.State() + "." + c.Fun()
	f, ok := funcs[fun]
	if !ok {
		if c.SLS() != "" {
			return failed(c, fmt.Sprintf("State '%s' was not found in SLS '%s'\n", fun, c.SLS()))
		}
		return failed(c, fmt.Sprintf("Specified state '%s' was not found\n", fun))
	}
	switch st, names := checkRequisites(low, c, running); st {
	case "unmet":
		// A requisite that did not run: only after failhard or a
		// cycle, which state.Check refuses before anything runs.
		return failed(c, "One or more requisite failed: "+names)
	case "fail":
		r := failed(c, "One or more requisite failed: "+names)
		r["duration"], r["start_time"] = 0.0, time.Now().Format("15:04:05.000000")
		return r
	case "onfail":
		return notRun("State was not run because onfail req did not change")
	case "onchanges":
		return notRun("State was not run because none of the onchanges reqs changed")
	case "change":
		r := call(ctx, x, f, c)
		if !state.Truthy(r["changes"]) && c.State() == "test" {
			return testModWatch(c, low, running)
		}
		return r
	}
	return call(ctx, x, f, c)
}

func failed(c state.Chunk, comment string) map[string]any {
	return map[string]any{"name": c["name"], "changes": map[string]any{}, "result": false, "comment": comment}
}

// call runs f; a panic fails the state, as an exception does in Salt's
// State.call.
func call(ctx context.Context, x *Exec, f Func, c state.Chunk) (r map[string]any) {
	defer func() {
		if p := recover(); p != nil {
			r = failed(c, fmt.Sprintf("An exception occurred in this state: panic: %v\n%s", p, debug.Stack()))
		}
	}()
	r = f(ctx, x, c)
	if _, ok := r["changes"]; !ok || r["changes"] == nil {
		r["changes"] = map[string]any{}
	}
	return r
}

// checkRequisites is Salt's check_requisite for the kinds above (watch
// is require for every module but test, which has a mod_watch): "met",
// "unmet", "fail", "onfail", "onchanges" or "change", and for "fail" the
// failed requisites as "sls.id" names.
func checkRequisites(low []state.Chunk, c state.Chunk, running map[string]map[string]any) (string, string) {
	hasWatch := c.State() == "test"
	stats := map[string]bool{}
	var failedNames []string
	for _, kind := range requisiteKinds {
		refs := state.Reqs(c, kind)
		if len(refs) == 0 {
			continue
		}
		if strings.HasPrefix(kind, "watch") && !hasWatch {
			kind = strings.Replace(kind, "watch", "require", 1)
		}
		rs := map[string]bool{}
		for _, ref := range refs {
			for _, j := range state.Matches(low, ref) {
				t := low[j]
				res, ok := running[state.Tag(t)]
				if !ok {
					rs["unmet"] = true
					continue
				}
				result := res["result"]
				if strings.HasPrefix(kind, "onfail") {
					if result == true {
						rs["onfail"] = true
						continue
					}
				} else if result == false {
					rs["fail"] = true
					failedNames = append(failedNames, t.SLS()+"."+t.ID())
					continue
				}
				if strings.HasPrefix(kind, "onchanges") {
					if state.Truthy(res["changes"]) {
						rs["onchangesmet"] = true
					} else {
						rs["onchanges"] = true
					}
					continue
				}
				if strings.HasPrefix(kind, "watch") && state.Truthy(res["changes"]) {
					rs["change"] = true
					continue
				}
				if ran, ok := res["__state_ran__"]; !ok || ran != false {
					rs["met"] = true
				}
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
	sort.Strings(failedNames)
	failedNames = uniq(failedNames)
	switch {
	case stats["unmet"]:
		return "unmet", strings.Join(failedNames, ", ")
	case stats["fail"]:
		return "fail", strings.Join(failedNames, ", ")
	case stats["onfail"] && !stats["onchangesmet"]:
		return "onfail", ""
	case stats["onchanges"] && !stats["onchangesmet"]:
		return "onchanges", ""
	case stats["change"]:
		return "change", ""
	case stats["onfail"]:
		return "onfail", ""
	}
	return "met", ""
}

func uniq(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
