package state

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/state"
)

// The state.* execution functions (salt/modules/state.py). The master
// compiles the states and sends them in the job's "__state__" kwarg (see
// the states contract): these functions check that the job is for this
// device (__for__), that no other state run is going on (Salt's
// _check_queue), and run the chunks with the engine. A masterless agent
// (file_client: local, halite-call --local) compiles its own file_roots
// instead (funcs_local.go).

// Salt's exit codes of a state run (salt/defaults/exitcodes.py).
const (
	retcodeCompiler = 1 // EX_STATE_COMPILER_ERROR
	retcodeFailure  = 2 // EX_STATE_FAILURE
)

// optsHost is a Host that has the agent's options (Salt's __opts__).
type optsHost interface{ Opts() map[string]any }

// runningHost is a Host that lists the running jobs (saltutil.running).
type runningHost interface{ Running() []map[string]any }

// hostOf checks the executor's host.
func hostOf(host any) (Host, error) {
	h, ok := host.(Host)
	if !ok || h == nil {
		return nil, exec.ErrNoHost
	}
	return h, nil
}

func optsOf(h Host) map[string]any {
	if o, ok := h.(optsHost); ok {
		if m := o.Opts(); m != nil {
			return m
		}
	}
	return map[string]any{}
}

// splitReq gives the job's positional arguments and its kwargs, with
// Salt's packed {"__kwarg__": True, ...} arguments unpacked.
func splitReq(req exec.Request) ([]any, map[string]any) {
	kw := make(map[string]any, len(req.Kwargs))
	var args []any
	for _, a := range req.Args {
		if m, ok := a.(map[string]any); ok && m["__kwarg__"] == true {
			for k, v := range m {
				if k != "__kwarg__" {
					kw[k] = v
				}
			}
			continue
		}
		args = append(args, a)
	}
	for k, v := range req.Kwargs {
		kw[k] = v
	}
	return args, kw
}

// checkFor refuses a job whose __for__ does not list this device.
func checkFor(h Host, kw map[string]any) error {
	v, ok := kw["__for__"]
	if !ok {
		return nil
	}
	ids, ok := v.([]any)
	if !ok {
		return exec.Commandf("refused: the job's __for__ is not a list of device ids")
	}
	for _, id := range ids {
		if s, ok := id.(string); ok && s == h.ID() {
			return nil
		}
	}
	return exec.Commandf("refused: this job's states were compiled for other devices, not %s", h.ID())
}

// jidTime is Salt's jid_to_time: "2026, Nov 24 04:28:23.123456".
func jidTime(jid string) string {
	if len(jid) != 20 {
		return ""
	}
	t, err := time.Parse("20060102150405", jid[:14])
	if err != nil {
		return ""
	}
	return t.Format("2006, Jan 02 15:04:05") + "." + jid[14:]
}

// stateJobs lists the other running state.* jobs.
func stateJobs(h Host, req exec.Request) []map[string]any {
	rh, ok := h.(runningHost)
	if !ok {
		return nil
	}
	var out []map[string]any
	self := false
	for _, j := range rh.Running() {
		fun, _ := j["fun"].(string)
		if !strings.HasPrefix(fun, "state.") {
			continue
		}
		if !self && fun == req.Fun && j["jid"] == req.JID {
			self = true
			continue
		}
		out = append(out, j)
	}
	return out
}

// running is Salt's state.running: a sentence per other state run.
func running(h Host, req exec.Request) []any {
	out := []any{}
	for _, j := range stateJobs(h, req) {
		jid := fmt.Sprint(j["jid"])
		out = append(out, fmt.Sprintf("The function %q is running as PID %v and was started at %s with jid %s",
			j["fun"], j["pid"], jidTime(jid), jid))
	}
	return out
}

// checkQueue is Salt's _check_queue: with queue=True wait for the state
// runs started before this one; with queue=N wait only when fewer than N
// are; else refuse while another runs. It returns the refusal, or nil.
func checkQueue(ctx context.Context, h Host, req exec.Request, kw map[string]any) (any, error) {
	queue, ok := kw["queue"]
	if !ok || queue == nil {
		queue = optsOf(h)["state_queue"]
	}
	wait := func(max int) (bool, error) {
		for {
			var prior int
			for _, j := range stateJobs(h, req) {
				if jid, _ := j["jid"].(string); jid < req.JID || req.JID == "" {
					prior++
				}
			}
			if prior == 0 {
				return true, nil
			}
			if max > 0 && prior >= max {
				return false, nil
			}
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	switch q := queue.(type) {
	case bool:
		if q {
			_, err := wait(0)
			return nil, err
		}
	default:
		if n, ok := toInt(q); ok && n > 0 {
			done, err := wait(n)
			if err != nil || done {
				return nil, err
			}
		}
	}
	if state.Truthy(kw["concurrent"]) {
		return nil, nil
	}
	if conflict := running(h, req); len(conflict) > 0 {
		return exec.Retcode{Return: conflict, Code: retcodeCompiler}, nil
	}
	return nil, nil
}

// testValue is Salt's _get_test_value: the compiled "test", the test=
// kwarg, or the agent's test option.
func testValue(h Host, st map[string]any, kw map[string]any) bool {
	if v, ok := st["test"]; ok && v != nil {
		return state.Truthy(v)
	}
	if v, ok := kw["test"]; ok && v != nil {
		return isTrue(v)
	}
	return isTrue(optsOf(h)["test"])
}

// isTrue is salt.utils.data.is_true.
func isTrue(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.EqualFold(x, "true") || x == "1"
	}
	return state.Truthy(v)
}

// stateData returns the job's compiled states, or compiles the local
// file_roots on a masterless agent.
func stateData(h Host, req exec.Request, args []any, kw map[string]any, mode string) (map[string]any, error) {
	if v, ok := kw["__state__"]; ok {
		st, ok := v.(map[string]any)
		if !ok {
			return nil, exec.Commandf("the job's __state__ is not a mapping")
		}
		return st, nil
	}
	o := optsOf(h)
	if o["file_client"] == "local" || o["master_type"] == "disable" || state.Truthy(o["local"]) {
		return compileLocal(h, o, args, kw, mode)
	}
	return nil, exec.Commandf("%s needs the states the master compiles: run it from the master (halite TARGET %s), or masterless with halite-call --local", req.Fun, req.Fun)
}

// errorsOf reads __state__["errors"].
func errorsOf(st map[string]any) []any {
	var out []any
	for _, e := range reqList(st["errors"]) {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// lowOf reads __state__["low"].
func lowOf(st map[string]any) ([]state.Chunk, error) {
	raw := reqList(st["low"])
	out := make([]state.Chunk, 0, len(raw))
	for i, c := range raw {
		m, ok := c.(map[string]any)
		if !ok {
			return nil, exec.Commandf("chunk %d of the job's low state is not a mapping", i)
		}
		out = append(out, state.Chunk(m))
	}
	return out, nil
}

// engineOptions are the engine's options for a job.
func engineOptions(h Host, req exec.Request, st, kw map[string]any) Options {
	o := optsOf(h)
	events := o["state_events"]
	if v, ok := kw["state_events"]; ok {
		events = v
	}
	var disabled []string
	for _, d := range reqList(o["disabled_requisites"]) {
		disabled = append(disabled, fmt.Sprint(d))
	}
	return Options{Test: testValue(h, st, kw), Failhard: isTrue(o["failhard"]), StateEvents: isTrue(events),
		Local: state.Truthy(o["local"]), JID: req.JID, DisabledRequisites: disabled}
}

// applyStates is state.apply, state.sls, state.highstate and state.test.
func applyStates(mode string) exec.ExtFunc {
	return func(ctx context.Context, host any, req exec.Request) (any, error) {
		h, err := hostOf(host)
		if err != nil {
			return nil, err
		}
		args, kw := splitReq(req)
		if mode == "test" {
			kw["test"] = true
		}
		if err := checkFor(h, kw); err != nil {
			return nil, err
		}
		if conflict, err := checkQueue(ctx, h, req, kw); conflict != nil || err != nil {
			return conflict, err
		}
		if mode == "sls" && len(args) == 0 && kw["mods"] == nil && kw["__state__"] == nil {
			return nil, exec.Invalidf("state.sls needs the SLS to apply: state.sls mods")
		}
		st, err := stateData(h, req, args, kw, mode)
		if err != nil {
			return nil, err
		}
		if errs := errorsOf(st); len(errs) > 0 {
			return exec.Retcode{Return: errs, Code: retcodeCompiler}, nil
		}
		low, err := lowOf(st)
		if err != nil {
			return nil, err
		}
		highstate := mode == "highstate" || (mode != "sls" && len(args) == 0 && kw["mods"] == nil && reqList(st["mods"]) == nil)
		if len(low) == 0 && highstate {
			// Salt's call_highstate when the top file gives nothing.
			cmt := "No Top file or master_tops data matches found. Please see master log for details."
			if top, ok := st["top"].(map[string]any); ok && len(top) > 0 {
				cmt = "No states found for this minion"
			}
			return exec.Retcode{Code: retcodeFailure, Return: map[string]any{"no_|-states_|-states_|-None": map[string]any{
				"result": false, "comment": cmt, "name": "No States", "changes": map[string]any{}, "__run_num__": 0}}}, nil
		}
		ret, err := Run(ctx, h, low, engineOptions(h, req, st, kw))
		if err != nil {
			return nil, err
		}
		if !CheckResult(ret, low) {
			return exec.Retcode{Return: ret, Code: retcodeFailure}, nil
		}
		return ret, nil
	}
}

// CheckResult is Salt's salt.utils.state.check_result over a run's
// return: false when a state failed, unless an onfail handler with
// onfail_stop: False handled it (check_onfail_requisites), or when nothing
// ran.
func CheckResult(ret map[string]any, low []state.Chunk) bool {
	if len(ret) == 0 {
		return false
	}
	tags := make([]string, 0, len(ret))
	for t := range ret {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		m, ok := ret[t].(map[string]any)
		if !ok {
			return false
		}
		if m["result"] != false {
			continue
		}
		if !onfailHandled(t, m, ret, low) {
			return false
		}
	}
	return true
}

// onfailHandled is Salt's check_onfail_requisites on the low state: a
// failed state is handled when states with onfail_stop: False name it in
// their onfail and those succeeded.
func onfailHandled(tag string, m map[string]any, ret map[string]any, low []state.Chunk) bool {
	id, _ := m["__id__"].(string)
	mod, _, _ := strings.Cut(tag, "_|-")
	var handlers []state.Chunk
	for _, c := range low {
		if c.ID() == id {
			continue
		}
		if v, ok := c["onfail_stop"]; !ok || v != false {
			continue
		}
		for _, req := range reqList(c["onfail"]) {
			if k, v, ok := reqKV(req); ok && v == id && (k == mod || k == "id") {
				handlers = append(handlers, c)
				break
			}
		}
	}
	if len(handlers) == 0 {
		return false
	}
	for _, hc := range handlers {
		x, ok := ret[state.Tag(hc)].(map[string]any)
		if !ok || x["result"] != true {
			return false
		}
	}
	return true
}

// single is state.single: one state built on the agent from its
// arguments, with no requisites.
func single(ctx context.Context, host any, req exec.Request) (any, error) {
	h, err := hostOf(host)
	if err != nil {
		return nil, err
	}
	args, kw := splitReq(req)
	if err := checkFor(h, kw); err != nil {
		return nil, err
	}
	if conflict, err := checkQueue(ctx, h, req, kw); conflict != nil || err != nil {
		return conflict, err
	}
	fun, name := kw["fun"], kw["name"]
	if len(args) > 0 {
		fun = args[0]
	}
	if len(args) > 1 {
		name = args[1]
	}
	if fun == nil {
		return nil, exec.Invalidf("state.single needs a state function: state.single pkg.installed name=vim")
	}
	if name == nil {
		return nil, exec.Invalidf("state.single needs the state's name: state.single %v name=...", fun)
	}
	mod, f, ok := strings.Cut(fmt.Sprint(fun), ".")
	if !ok || mod == "" || f == "" {
		return exec.Retcode{Return: "Invalid function passed", Code: retcodeCompiler}, nil
	}
	test := testValue(h, nil, kw)
	c := state.Chunk{}
	for k, v := range kw {
		if strings.HasPrefix(k, "__") || k == "test" || k == "queue" || k == "fun" || k == "concurrent" {
			continue
		}
		c[k] = v
	}
	c["state"], c["fun"], c["__id__"], c["name"] = mod, f, name, name
	if errs := verify(c, f); len(errs) > 0 {
		out := make([]any, len(errs))
		for i, e := range errs {
			out[i] = e
		}
		return exec.Retcode{Return: out, Code: retcodeCompiler}, nil
	}
	o := engineOptions(h, req, nil, kw)
	o.Test = test
	r := newRun(h, []state.Chunk{c}, o)
	x := r.call(ctx, r.chunks[0], map[string]ret{})
	r.reconcile(map[string]ret{state.Tag(r.chunks[0]): x}, nil, true)
	delete(x, "proc")
	out := map[string]any{state.Tag(r.chunks[0]): map[string]any(x)}
	if !CheckResult(out, nil) {
		return exec.Retcode{Return: out, Code: retcodeFailure}, nil
	}
	return out, nil
}

// show returns a part of the compiled states: top, high or low.
func show(part string) exec.ExtFunc {
	return func(ctx context.Context, host any, req exec.Request) (any, error) {
		h, err := hostOf(host)
		if err != nil {
			return nil, err
		}
		args, kw := splitReq(req)
		if err := checkFor(h, kw); err != nil {
			return nil, err
		}
		if conflict, err := checkQueue(ctx, h, req, kw); conflict != nil || err != nil {
			return conflict, err
		}
		mode := "highstate"
		if req.Fun == "state.show_sls" {
			mode = "sls"
			if len(args) == 0 && kw["mods"] == nil && kw["__state__"] == nil {
				return nil, exec.Invalidf("state.show_sls needs the SLS to show: state.show_sls mods")
			}
		}
		st, err := stateData(h, req, args, kw, mode)
		if err != nil {
			return nil, err
		}
		if errs := errorsOf(st); len(errs) > 0 {
			return exec.Retcode{Return: errs, Code: retcodeCompiler}, nil
		}
		v := st[part]
		if v == nil {
			switch part {
			case "low":
				v = []any{}
			default:
				v = map[string]any{}
			}
		}
		return v, nil
	}
}

func init() {
	// Short docs: every byte counts on the armv7 agent.
	for _, f := range []struct {
		name, doc string
		run       exec.ExtFunc
	}{
		{"state.apply", "Apply the highstate, or the SLS given (a,b): test=True, saltenv=, pillar=, queue=True, state_events=True.", applyStates("apply")},
		{"state.sls", "Apply the SLS given (a,b); the arguments of state.apply.", applyStates("sls")},
		{"state.highstate", "Apply the states top.sls gives this device; the arguments of state.apply.", applyStates("highstate")},
		{"state.test", "state.apply with test=True.", applyStates("test")},
		{"state.single", "Run one state function: state.single file.managed name=/etc/motd contents=hi", single},
		{"state.show_top", "Return the top data this device gets.", show("top")},
		{"state.show_highstate", "Return the high data of this device's highstate.", show("high")},
		{"state.show_lowstate", "Return the low state (ordered chunks) of this device's highstate.", show("low")},
		{"state.show_sls", "Return the high data of the SLS given.", show("high")},
		{"state.running", "Return a sentence for each state run in progress.", stateRunning},
	} {
		exec.Register(f.name, f.doc+"\n\nCLI Example:\n\n    halite '*' "+f.name, f.run)
	}
}

// stateRunning is state.running.
func stateRunning(_ context.Context, host any, req exec.Request) (any, error) {
	h, err := hostOf(host)
	if err != nil {
		return nil, err
	}
	_, kw := splitReq(req)
	if state.Truthy(kw["concurrent"]) {
		return []any{}, nil
	}
	return running(h, req), nil
}
