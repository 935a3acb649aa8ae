package orch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/internal/batch"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/state"
)

// The master-side state functions of salt/states/saltmod.py (Salt 3006).

func init() {
	register("salt.state", saltState)
	register("salt.function", saltFunction)
	register("salt.runner", saltRunner)
	register("salt.wheel", saltWheel)
	register("salt.wait_for_event", waitForEvent)
}

// internalKeys are the chunk's keys that the state system reads (Salt's
// STATE_INTERNAL_KEYWORDS), never a runner's or wheel function's
// arguments.
var internalKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`name onchanges onchanges_any onfail onfail_any onfail_all onfail_stop prereq
		prerequired watch watch_any require require_any listen onchanges_in onfail_in prereq_in watch_in
		require_in listen_in fun state check_cmd cmd_opts_exclude failhard onlyif unless creates retry order
		parallel reload_modules reload_grains reload_pillar runas runas_password fire_event saltenv
		umask use use_in`) {
		internalKeys[k] = true
	}
}

// missingArg is Salt's State.call error for a required argument.
func missingArg(c state.Chunk, arg string) map[string]any {
	return failed(c, fmt.Sprintf("Missing parameter %s for state %s.%s", arg, c.State(), c.Fun()))
}

func str(c state.Chunk, k, def string) string {
	v, ok := c[k]
	if !ok || v == nil {
		return def
	}
	return fmt.Sprint(v)
}

// failMinions reads fail_minions: a list or a comma separated string;
// anything else is ignored with Salt's warning.
func failMinions(c state.Chunk, r map[string]any) map[string]bool {
	out := map[string]bool{}
	switch v := c["fail_minions"].(type) {
	case nil:
	case string:
		for _, s := range strings.Split(v, ",") {
			out[strings.TrimSpace(s)] = true
		}
	case []any:
		for _, s := range v {
			out[fmt.Sprint(s)] = true
		}
	default:
		r["warnings"] = append(warnings(r), "'fail_minions' needs to be a list or a comma separated string. Ignored.")
	}
	return out
}

func warnings(r map[string]any) []any {
	w, _ := r["warnings"].([]any)
	return w
}

// cmdOpts are saltutil.cmd's options besides the job.
type cmdOpts struct {
	batch    string // batch: N or N%
	wait     time.Duration
	maxFail  string // batch_max_fail (Halite's)
	failhard bool
	subset   int
	expect   bool // expect_minions: missing minions are {"failed": True}
}

// cmdOptions reads a step's batch, batch_wait, batch_max_fail, subset and
// failhard; a bad value is an error for the step's comment.
func (x *Exec) cmdOptions(c state.Chunk, expectDefault bool) (cmdOpts, error) {
	o := cmdOpts{expect: expectDefault}
	if v, ok := c["expect_minions"]; ok {
		o.expect = state.Truthy(v)
	}
	if v, ok := c["batch"]; ok && v != nil {
		o.batch = fmt.Sprint(v)
		if err := batch.Check(o.batch); err != nil {
			return o, err
		}
	}
	if v, ok := c["batch_wait"]; ok && v != nil {
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil || f < 0 {
			return o, fmt.Errorf("batch_wait takes seconds, not %v", v)
		}
		o.wait = time.Duration(f * float64(time.Second))
	}
	if v, ok := c["batch_max_fail"]; ok && v != nil {
		o.maxFail = fmt.Sprint(v)
		if err := batch.CheckLimit(o.maxFail); err != nil {
			return o, err
		}
	}
	if v, ok := c["subset"]; ok && v != nil {
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("subset takes a number of minions, not %v", v)
		}
		o.subset = n
	}
	// Salt: failhard is True, or the master's failhard.
	o.failhard = c["failhard"] == true || x.O.Failhard
	return o, nil
}

// cmd is Salt's saltutil.cmd as saltmod uses it: each minion's
// {"ret", "retcode", "jid", "out"}, or {"failed": True} for a minion that
// did not return when expect_minions. A target that matches nothing is an
// empty result.
func (x *Exec) cmd(ctx context.Context, req *api.Request, o cmdOpts) (map[string]map[string]any, string, error) {
	out := map[string]map[string]any{}
	var jid string
	add := func(data map[string]any) {
		id, _ := data["id"].(string)
		if id == "" {
			return
		}
		j, _ := data["jid"].(string)
		if jid == "" {
			jid = j
		}
		rc := data["retcode"]
		if rc == nil {
			rc = 0
		}
		out[id] = map[string]any{"ret": data["return"], "retcode": rc, "jid": j, "out": outOf(data, req.Fun)}
	}
	ids := []string(nil)
	if o.batch != "" || o.subset > 0 {
		minions, connected, err := x.M.Expected(req.Tgt, req.TgtType)
		if err != nil {
			return nil, "", noMinions(err)
		}
		for _, id := range minions {
			if connected[id] {
				ids = append(ids, id)
			} else if o.expect {
				out[id] = map[string]any{"failed": true}
			}
		}
		sort.Strings(ids)
		if o.subset > 0 {
			// cmd_subset: a random n of them (Salt asks sys.list_functions
			// first; every Halite agent has the functions orchestrate
			// publishes).
			rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			ids = ids[:min(o.subset, len(ids))]
			sort.Strings(ids)
		}
		if len(ids) == 0 {
			return out, "", nil
		}
	}
	if o.batch == "" {
		job := *req
		if ids != nil {
			job.Tgt, job.TgtType = strings.Join(ids, ","), "list"
		}
		j, minions, err := x.M.Cmd(ctx, &job, add)
		if err != nil {
			return out, "", noMinions(err)
		}
		if o.expect {
			for _, id := range minions {
				if _, ok := out[id]; !ok {
					out[id] = map[string]any{"failed": true}
				}
			}
		}
		return out, j, nil
	}
	start := func(ctx context.Context, ids []string, ret func(string, map[string]any)) error {
		job := *req
		job.Tgt, job.TgtType = strings.Join(ids, ","), "list"
		_, _, err := x.M.Cmd(ctx, &job, func(data map[string]any) {
			id, _ := data["id"].(string)
			ret(id, data)
		})
		return err
	}
	res, err := batch.Run(ctx, ids, batch.Options{Size: o.batch, Wait: o.wait, Failhard: o.failhard, MaxFail: o.maxFail}, start, batch.Hooks{
		Returned: func(r batch.Return) error {
			switch {
			case r.Data != nil:
				add(r.Data)
			case o.expect:
				out[r.ID] = map[string]any{"failed": true}
			}
			return nil
		},
		Failed: func(data map[string]any) bool {
			return data["success"] == false || retcode(data["retcode"]) > 0
		},
	})
	if err != nil {
		return out, jid, err
	}
	if res.Stopped != "" {
		for _, id := range res.NotRun {
			out[id] = map[string]any{"failed": true, "ret": "Not run: " + res.Stopped}
		}
	}
	return out, jid, nil
}

// outOf is the outputter of a minion's return: "highstate" for the state
// functions.
func outOf(data map[string]any, fun string) string {
	if o, ok := data["out"].(string); ok && o != "" {
		return o
	}
	if strings.HasPrefix(fun, "state.") {
		return "highstate"
	}
	return "nested"
}

func retcode(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case int64:
		return int(n)
	case uint64:
		return int(min(n, 255))
	case float64:
		return int(n)
	}
	return 0
}

// noMinions turns "no minions matched" into an empty result, as
// saltutil.cmd gives.
func noMinions(err error) error {
	var re *api.RemoteError
	if errors.As(err, &re) && re.Code == api.CodeNoMinions {
		return nil
	}
	return err
}

func (x *Exec) fireArgs(typ, tgt, name string, args map[string]any) {
	if x.O.JID == "" {
		return
	}
	x.M.Fire("salt/run/"+x.O.JID+"/args", map[string]any{"type": typ, "tgt": tgt, "name": name, "args": args})
}

// saltState is saltmod.state: run state.sls (sls:) or state.highstate
// (highstate: True) on tgt and sum the minions' results up.
func saltState(ctx context.Context, x *Exec, c state.Chunk) map[string]any {
	r := map[string]any{"name": c["name"], "changes": map[string]any{}, "comment": "", "result": true}
	allowFail := 0
	if v, ok := c["allow_fail"]; ok {
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil {
			r["result"], r["comment"] = false, "Passed invalid value for 'allow_fail', must be an int"
			return r
		}
		allowFail = n
	}
	tgt, ok := c["tgt"]
	if !ok {
		return missingArg(c, "tgt")
	}
	req := &api.Request{Op: api.OpPublish, Tgt: fmt.Sprint(tgt), TgtType: str(c, "tgt_type", "glob"),
		Ret: str(c, "ret", ""), User: x.O.User, Kwarg: map[string]any{}}
	switch sls := c["sls"]; {
	case state.Truthy(c["highstate"]):
		req.Fun = "state.highstate"
	case state.Truthy(c["top"]):
		r["result"], r["comment"] = false, "top= is not supported by Halite's salt.state: give sls or highstate"
		return r
	case state.Truthy(sls):
		req.Fun = "state.sls"
		if l, ok := sls.([]any); ok {
			parts := make([]string, len(l))
			for i, s := range l {
				parts[i] = fmt.Sprint(s)
			}
			sls = strings.Join(parts, ",")
		}
		req.Arg = []any{fmt.Sprint(sls)}
	default:
		r["result"], r["comment"] = false, "No highstate or sls specified, no execution made"
		return r
	}
	test := x.O.Test
	if v, ok := c["test"]; ok && v != nil {
		req.Kwarg["test"] = v
		test = test || state.Truthy(v)
	} else if x.O.Test {
		req.Kwarg["test"] = true
	}
	for _, k := range []string{"pillar", "pillarenv", "saltenv", "exclude"} {
		if v, ok := c[k]; ok && v != nil && (k != "pillar" || state.Truthy(v)) {
			req.Kwarg[k] = v
		}
	}
	if v, ok := c["concurrent"]; ok {
		if _, isBool := v.(bool); !isBool {
			r["result"], r["comment"] = false, "Must pass in boolean for value of 'concurrent'"
			return r
		}
	}
	if t, ok := c["timeout"]; ok && t != nil {
		f, err := strconv.ParseFloat(fmt.Sprint(t), 64)
		if err != nil || f <= 0 {
			r["result"], r["comment"] = false, fmt.Sprintf("timeout takes seconds, not %v", t)
			return r
		}
		req.Timeout = f
	}
	o, err := x.cmdOptions(c, true)
	if err != nil {
		r["result"], r["comment"] = false, err.Error()
		return r
	}
	x.fireArgs("state", req.Tgt, fmt.Sprint(c["name"]), map[string]any{"fun": req.Fun, "arg": req.Arg, "kwarg": req.Kwarg, "tgt_type": req.TgtType})
	cmdRet, jid, err := x.cmd(ctx, req, o)
	if err != nil {
		r["result"], r["comment"] = false, err.Error()
		return r
	}
	if jid != "" {
		r["__jid__"] = jid
	}
	fm := failMinions(c, r)
	if len(cmdRet) == 0 && o.expect {
		r["result"], r["comment"] = false, "No minions returned"
		return r
	}
	changes := map[string]any{}
	var fail, noChange []string
	for _, minion := range sortedKeys(cmdRet) {
		md := cmdRet[minion]
		var mRet any = false
		mState := true
		if md["failed"] == true {
			mState = false
		} else {
			mRet = md["ret"]
			mState = CheckResult(mRet)
		}
		if !mState {
			if !fm[minion] {
				fail = append(fail, minion)
			}
			changes[minion] = mRet
			continue
		}
		changed := false
		if m, ok := mRet.(map[string]any); ok {
			for _, item := range m {
				if im, ok := item.(map[string]any); ok && state.Truthy(im["changes"]) {
					changed = true
					break
				}
			}
		}
		if changed {
			changes[minion] = mRet
		} else {
			noChange = append(noChange, minion)
		}
	}
	if len(changes) > 0 {
		r["changes"] = map[string]any{"out": "highstate", "ret": changes}
	}
	if len(fail) > allowFail {
		r["result"] = false
		r["comment"] = "Run failed on minions: " + strings.Join(fail, ", ")
	} else {
		comment := "States ran successfully."
		if len(changes) > 0 {
			comment += " Updating " + strings.Join(sortedKeys(changes), ", ") + "."
		}
		if len(noChange) > 0 {
			comment += " No changes made to " + strings.Join(noChange, ", ") + "."
		}
		r["comment"] = comment
	}
	if test && len(changes) > 0 && r["result"] == true {
		r["result"] = nil
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// saltFunction is saltmod.function: run an execution function on tgt.
func saltFunction(ctx context.Context, x *Exec, c state.Chunk) map[string]any {
	name := str(c, "name", "")
	r := map[string]any{"name": name, "changes": map[string]any{}, "comment": "", "result": true}
	tgt, ok := c["tgt"]
	if !ok {
		return missingArg(c, "tgt")
	}
	req := &api.Request{Op: api.OpPublish, Fun: name, Tgt: fmt.Sprint(tgt), TgtType: str(c, "tgt_type", "glob"),
		Ret: str(c, "ret", ""), User: x.O.User}
	switch a := c["arg"].(type) {
	case nil:
	case string:
		r["warnings"] = []any{"Please specify 'arg' as a list of arguments."}
		for _, f := range strings.Fields(a) {
			req.Arg = append(req.Arg, f)
		}
	case []any:
		req.Arg = a
	default:
		req.Arg = []any{a}
	}
	switch k := c["kwarg"].(type) {
	case nil:
	case map[string]any:
		req.Kwarg = k
	default:
		r["result"], r["comment"] = false, "kwarg must be a dictionary"
		return r
	}
	if _, ok := c["fail_function"]; ok {
		r["result"], r["comment"] = false, "fail_function is not supported by Halite's salt.function"
		return r
	}
	if t, ok := c["timeout"]; ok && t != nil {
		f, err := strconv.ParseFloat(fmt.Sprint(t), 64)
		if err != nil || f <= 0 {
			r["result"], r["comment"] = false, fmt.Sprintf("timeout takes seconds, not %v", t)
			return r
		}
		req.Timeout = f
	}
	o, err := x.cmdOptions(c, false)
	if err != nil {
		r["result"], r["comment"] = false, err.Error()
		return r
	}
	if x.O.Test {
		r["result"] = nil
		r["comment"] = fmt.Sprintf("Function %s would be executed on target %v", name, tgt)
		return r
	}
	x.fireArgs("function", req.Tgt, name, map[string]any{"arg": req.Arg, "kwarg": req.Kwarg, "tgt_type": req.TgtType})
	cmdRet, jid, err := x.cmd(ctx, req, o)
	if err != nil {
		r["result"], r["comment"] = false, err.Error()
		return r
	}
	if jid != "" {
		r["__jid__"] = jid
	}
	fm := failMinions(c, r)
	changes := map[string]any{}
	fail := map[string]bool{}
	for _, minion := range sortedKeys(cmdRet) {
		md := cmdRet[minion]
		var mRet any = false
		if retcode(md["retcode"]) != 0 {
			r["result"] = false
			fail[minion] = true
		}
		mFunc := true
		if md["failed"] == true {
			mFunc = false
		} else {
			mRet = md["ret"]
			if mRet == false {
				mFunc = false
			}
		}
		if !mFunc && !fm[minion] {
			fail[minion] = true
		}
		changes[minion] = mRet
	}
	if len(cmdRet) == 0 {
		r["result"], r["comment"] = false, "No minions responded"
		return r
	}
	if len(changes) > 0 {
		r["changes"] = map[string]any{"ret": changes}
	}
	if len(fail) > 0 {
		r["result"] = false
		r["comment"] = fmt.Sprintf("Running function %s failed on minions: %s", name, strings.Join(sortedKeys(fail), ", "))
	} else {
		r["comment"] = "Function ran successfully."
	}
	if len(changes) > 0 {
		r["comment"] = fmt.Sprintf("%s Function %s ran on %s.", r["comment"], name, strings.Join(sortedKeys(changes), ", "))
	}
	return r
}

// callArgs are a runner's or wheel function's arguments from a step: arg
// (a list) as the positional ones, kwarg (a mapping) and every other key
// that is not the state system's as keyword ones.
func callArgs(c state.Chunk) ([]any, map[string]any) {
	var arg []any
	switch a := c["arg"].(type) {
	case nil:
	case []any:
		arg = a
	default:
		arg = []any{a}
	}
	kwarg := map[string]any{}
	for k, v := range c {
		if internalKeys[k] || strings.HasPrefix(k, "__") || k == "arg" || k == "kwarg" {
			continue
		}
		kwarg[k] = v
	}
	if m, ok := c["kwarg"].(map[string]any); ok {
		for k, v := range m {
			kwarg[k] = v
		}
	}
	return arg, kwarg
}

// saltRunner is saltmod.runner: call a runner function on the master.
func saltRunner(ctx context.Context, x *Exec, c state.Chunk) map[string]any {
	return x.call(ctx, c, "Runner", x.M.Runner)
}

// saltWheel is saltmod.wheel: call a wheel function on the master.
func saltWheel(ctx context.Context, x *Exec, c state.Chunk) map[string]any {
	return x.call(ctx, c, "Wheel", x.M.Wheel)
}

type callFn func(ctx context.Context, fun string, arg []any, kwarg map[string]any, user string) (string, any, error)

func (x *Exec) call(ctx context.Context, c state.Chunk, kind string, fn callFn) map[string]any {
	name := str(c, "name", "")
	if x.O.Test {
		// Salt's wheel sets result to the tuple (None,), shown as a
		// list; Halite gives None for both.
		return map[string]any{"name": name, "result": nil, "changes": map[string]any{},
			"comment": fmt.Sprintf("%s function '%s' would be executed.", kind, name)}
	}
	arg, kwarg := callArgs(c)
	jid, res, err := fn(ctx, name, arg, kwarg, x.O.User)
	success := err == nil
	if err != nil {
		res = err.Error()
	}
	if m, ok := res.(map[string]any); ok {
		if _, isErr := m["Error"]; isErr {
			success = false
		}
		if data, ok := m["data"]; ok && success {
			// RunnerClient.low (salt/client/mixins.py): a return with
			// "data" succeeded when check_result says so.
			success = CheckResult(data)
		}
	}
	verb := "executed"
	if !success {
		verb = "failed"
	}
	r := map[string]any{"name": name, "changes": map[string]any{"return": res}, "result": success,
		"comment": fmt.Sprintf("%s function '%s' %s.", kind, name, verb)}
	if jid != "" {
		r["__jid__"] = jid
	}
	return r
}

// waitForEvent is saltmod.wait_for_event: wait on the master's bus for
// events whose tag matches name (a glob) until one has come from each id
// of id_list (data[event_id], or data["data"][event_id]; a list value
// counts for each id in it), or timeout (seconds, default 300) passes.
func waitForEvent(ctx context.Context, x *Exec, c state.Chunk) map[string]any {
	name := str(c, "name", "")
	r := map[string]any{"name": name, "changes": map[string]any{}, "comment": "", "result": false}
	if x.O.Test {
		r["result"], r["comment"] = nil, fmt.Sprintf("Orchestration would wait for event '%s'", name)
		return r
	}
	raw, ok := c["id_list"]
	if !ok {
		return missingArg(c, "id_list")
	}
	var idList []string
	switch l := raw.(type) {
	case []any:
		for _, v := range l {
			idList = append(idList, fmt.Sprint(v))
		}
	case string:
		idList = []string{l}
	default:
		r["comment"] = "id_list must be a list of ids"
		return r
	}
	eventID := str(c, "event_id", "id")
	timeout := 300.0
	if v, ok := c["timeout"]; ok && v != nil {
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil || f < 0 {
			r["comment"] = fmt.Sprintf("timeout takes seconds, not %v", v)
			return r
		}
		timeout = f
	}
	sub := x.M.Subscribe(name)
	defer sub.Close()
	start := time.Now()
	timer := time.NewTimer(time.Duration(timeout * float64(time.Second)))
	defer timer.Stop()
	var seen []any
	remove := func(id string) {
		for i, v := range idList {
			if v == id {
				idList = append(idList[:i], idList[i+1:]...)
				seen = append(seen, id)
				return
			}
		}
	}
	for len(idList) > 0 {
		select {
		case <-ctx.Done():
			r["comment"] = "Orchestration cancelled."
			return r
		case <-timer.C:
			if len(seen) > 0 {
				r["changes"] = map[string]any{"minions_seen": seen}
			}
			r["comment"] = "Timeout value reached."
			return r
		case ev, ok := <-sub.C():
			if !ok {
				r["comment"] = "The event bus closed."
				return r
			}
			val, ok := ev.Data[eventID]
			if !ok || val == nil {
				if d, isMap := ev.Data["data"].(map[string]any); isMap {
					val = d[eventID]
				}
			}
			switch v := val.(type) {
			case nil:
			case []any:
				for _, id := range v {
					remove(fmt.Sprint(id))
				}
			default:
				remove(fmt.Sprint(v))
			}
		}
	}
	r["changes"] = map[string]any{"minions_seen": seen}
	r["result"] = true
	r["comment"] = fmt.Sprintf("All events seen in %v seconds.", time.Since(start).Seconds())
	return r
}
