package orch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/state"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fleet is a stand-in for the master at saltutil.cmd's boundary, as Salt's
// unit tests patch saltutil.cmd (tests/unit/states/test_saltmod.py): each
// minion returns rets[id] for any job; down minions are matched but not
// connected and never return. The orchestrations against a real master
// and agents are in master/orchestrate_test.go and e2e.
type fleet struct {
	mu     sync.Mutex
	rets   map[string]map[string]any // minion -> its return dict
	down   map[string]bool
	reqs   []*api.Request
	calls  []string
	bus    *event.Bus
	runRes any
	runErr error
}

func newFleet(rets map[string]map[string]any) *fleet {
	return &fleet{rets: rets, down: map[string]bool{}, bus: event.NewBus(zap.NewNop())}
}

func (f *fleet) match(tgt, tgtType string) []string {
	var out []string
	for _, id := range sortedKeys(f.rets) {
		switch {
		case tgtType == "list" && strings.Contains(","+tgt+",", ","+id+","):
		case tgtType != "list" && (tgt == "*" || tgt == id):
		default:
			continue
		}
		out = append(out, id)
	}
	return out
}

func (f *fleet) Expected(tgt, tgtType string) ([]string, map[string]bool, error) {
	ids := f.match(tgt, tgtType)
	if len(ids) == 0 {
		return nil, nil, &api.RemoteError{Code: api.CodeNoMinions, Msg: "No minions matched the target."}
	}
	conn := map[string]bool{}
	for _, id := range ids {
		conn[id] = !f.down[id]
	}
	return ids, conn, nil
}

func (f *fleet) Cmd(ctx context.Context, req *api.Request, ret func(map[string]any)) (string, []string, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	ids := f.match(req.Tgt, req.TgtType)
	if len(ids) == 0 {
		return "", nil, &api.RemoteError{Code: api.CodeNoMinions, Msg: "No minions matched the target."}
	}
	jid := "20170406104341210934"
	for _, id := range ids {
		if f.down[id] {
			continue
		}
		d := map[string]any{"id": id, "jid": jid, "fun": req.Fun}
		for k, v := range f.rets[id] {
			d[k] = v
		}
		ret(d)
	}
	return jid, ids, nil
}

func (f *fleet) Runner(_ context.Context, fun string, arg []any, kwarg map[string]any, user string) (string, any, error) {
	f.calls = append(f.calls, fmt.Sprintf("runner %s %v %v", fun, arg, kwarg))
	return "20240101000000000001", f.runRes, f.runErr
}

func (f *fleet) Wheel(_ context.Context, fun string, arg []any, kwarg map[string]any, user string) (string, any, error) {
	f.calls = append(f.calls, fmt.Sprintf("wheel %s %v %v", fun, arg, kwarg))
	return "20240101000000000002", f.runRes, f.runErr
}

func (f *fleet) Subscribe(p string) *event.Subscription { return f.bus.Subscribe(p, 64) }
func (f *fleet) Fire(tag string, data map[string]any)   { f.bus.Publish(tag, data) }

// notify is the state return of tests/unit/states/test_saltmod.py.
func notify(changes map[string]any, result any) map[string]any {
	if changes == nil {
		changes = map[string]any{}
	}
	return map[string]any{"return": map[string]any{
		"test_|-notify_me_|-this is a name_|-show_notification": map[string]any{
			"comment": "Notify me", "name": "this is a name", "result": result, "__run_num__": 0,
			"__sls__": "demo", "changes": changes, "__id__": "notify_me",
		}}, "retcode": 0}
}

func chunk(kv ...any) state.Chunk {
	c := state.Chunk{}
	for i := 0; i < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

func run1(t *testing.T, f *fleet, o Options, fun string, kv ...any) map[string]any {
	t.Helper()
	mod, fn, _ := strings.Cut(fun, ".")
	c := chunk(append([]any{"state", mod, "fun", fn, "__id__", "step", "__sls__", "orch", "name", "state"}, kv...)...)
	return funcs[fun](context.Background(), &Exec{M: f, O: o}, c)
}

// TestSaltState pins saltmod.state's returns
// (tests/unit/states/test_saltmod.py test_state, Salt 3006).
func TestSaltState(t *testing.T) {
	silver := newFleet(map[string]map[string]any{"silver": notify(nil, true)})
	tests := []struct {
		name string
		f    *fleet
		o    Options
		kv   []any
		want map[string]any
	}{
		{"allow_fail", silver, Options{}, []any{"tgt", "minion1", "allow_fail", "a"},
			map[string]any{"name": "state", "changes": map[string]any{}, "result": false, "comment": "Passed invalid value for 'allow_fail', must be an int"}},
		{"no-sls", silver, Options{}, []any{"tgt", "minion1"},
			map[string]any{"name": "state", "changes": map[string]any{}, "result": false, "comment": "No highstate or sls specified, no execution made"}},
		{"concurrent", silver, Options{}, []any{"tgt", "minion1", "highstate", true, "concurrent", "a"},
			map[string]any{"name": "state", "changes": map[string]any{}, "result": false, "comment": "Must pass in boolean for value of 'concurrent'"}},
		{"no-changes", silver, Options{}, []any{"tgt", "silver", "highstate", true},
			map[string]any{"name": "state", "changes": map[string]any{}, "result": true, "__jid__": "20170406104341210934",
				"comment": "States ran successfully. No changes made to silver."}},
		{"no-minions", silver, Options{}, []any{"tgt", "nosuch", "sls", "web"},
			map[string]any{"name": "state", "changes": map[string]any{}, "result": false, "comment": "No minions returned"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run1(t, tt.f, tt.o, "salt.state", tt.kv...)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("salt.state (-want +got):\n%s", d)
			}
		})
	}
}

func TestSaltStateResults(t *testing.T) {
	changed := map[string]any{"testing": map[string]any{"old": "a", "new": "b"}}
	f := newFleet(map[string]map[string]any{
		"a1": notify(changed, true), "a2": notify(nil, true), "a3": notify(nil, false),
	})
	got := run1(t, f, Options{}, "salt.state", "tgt", "*", "sls", []any{"web", "db"})
	if got["result"] != false || got["comment"] != "Run failed on minions: a3" {
		t.Errorf("a failed minion: got %v %q, want false, Run failed on minions: a3", got["result"], got["comment"])
	}
	ch := got["changes"].(map[string]any)
	if ch["out"] != "highstate" || len(ch["ret"].(map[string]any)) != 2 {
		t.Errorf("changes: got %v, want out highstate and a1, a3 in ret", ch)
	}
	if r := f.reqs[len(f.reqs)-1]; r.Fun != "state.sls" || fmt.Sprint(r.Arg) != "[web,db]" {
		t.Errorf("job: got %s %v, want state.sls [web,db]", r.Fun, r.Arg)
	}
	// fail_minions and allow_fail forgive it.
	for _, kv := range [][]any{{"fail_minions", "a3"}, {"fail_minions", []any{"a3"}}, {"allow_fail", 1}} {
		got = run1(t, f, Options{}, "salt.state", append([]any{"tgt", "*", "sls", "web"}, kv...)...)
		if got["result"] != true || got["comment"] != "States ran successfully. Updating a1, a3. No changes made to a2." {
			t.Errorf("%v: got %v %q", kv, got["result"], got["comment"])
		}
	}
	got = run1(t, f, Options{}, "salt.state", "tgt", "*", "sls", "web", "fail_minions", 3, "allow_fail", 1)
	if w := fmt.Sprint(got["warnings"]); w != "['fail_minions' needs to be a list or a comma separated string. Ignored.]" {
		t.Errorf("bad fail_minions: warnings %s", w)
	}
	// test=True with changes is None; the job carries test.
	got = run1(t, newFleet(map[string]map[string]any{"a1": notify(changed, nil)}), Options{Test: true}, "salt.state", "tgt", "*", "sls", "web")
	if got["result"] != nil {
		t.Errorf("test with changes: result %v, want None", got["result"])
	}
	// expect_minions: a minion that does not return fails the step.
	down := newFleet(map[string]map[string]any{"a1": notify(nil, true), "a2": notify(nil, true)})
	down.down["a2"] = true
	got = run1(t, down, Options{}, "salt.state", "tgt", "*", "sls", "web", "timeout", 1)
	if got["comment"] != "Run failed on minions: a2" {
		t.Errorf("down minion: got %q, want Run failed on minions: a2", got["comment"])
	}
	if r := down.reqs[len(down.reqs)-1]; r.Timeout != 1 {
		t.Errorf("timeout: got %v, want 1", r.Timeout)
	}
}

// TestSaltStateBatch: batch: runs through package batch, a slice at a
// time; with failhard the first failed minion stops it.
func TestSaltStateBatch(t *testing.T) {
	rets := map[string]map[string]any{}
	for i := range 10 {
		rets[fmt.Sprintf("m%d", i)] = notify(nil, true)
	}
	rets["m3"] = notify(nil, false)
	rets["m3"]["retcode"] = 2
	f := newFleet(rets)
	got := run1(t, f, Options{}, "salt.state", "tgt", "*", "sls", "web", "batch", "20%")
	if got["comment"] != "Run failed on minions: m3" {
		t.Errorf("batch: got %q", got["comment"])
	}
	for _, r := range f.reqs {
		if r.TgtType != "list" || strings.Count(r.Tgt, ",") > 1 {
			t.Errorf("batch of 20%% of 10: job on %s %q, want a list of at most 2", r.TgtType, r.Tgt)
		}
	}
	f = newFleet(rets)
	got = run1(t, f, Options{}, "salt.state", "tgt", "*", "sls", "web", "batch", 1, "failhard", true)
	fails := strings.TrimPrefix(got["comment"].(string), "Run failed on minions: ")
	if !strings.HasPrefix(fails, "m3, m4") || len(f.reqs) != 4 {
		t.Errorf("batch 1 with failhard: got %q after %d jobs, want m3 and the minions not run, after 4 jobs", got["comment"], len(f.reqs))
	}
	f = newFleet(rets)
	got = run1(t, f, Options{}, "salt.state", "tgt", "*", "sls", "web", "subset", 3)
	if len(f.reqs) != 1 || strings.Count(f.reqs[0].Tgt, ",") != 2 {
		t.Errorf("subset 3: jobs %d on %q, want one on three minions", len(f.reqs), f.reqs[0].Tgt)
	}
	for _, kv := range [][]any{{"batch", "0"}, {"batch", 1, "batch_max_fail", "x"}, {"subset", -1}, {"batch", 1, "batch_wait", "x"}} {
		got = run1(t, f, Options{}, "salt.state", append([]any{"tgt", "*", "sls", "web"}, kv...)...)
		if got["result"] != false {
			t.Errorf("%v: result %v, want False", kv, got["result"])
		}
	}
}

// TestSaltFunction pins saltmod.function (test_saltmod.py test_function,
// test_function_when_no_minions_match).
func TestSaltFunction(t *testing.T) {
	larry := newFleet(map[string]map[string]any{"larry": {"return": "", "retcode": 0}})
	got := run1(t, larry, Options{Test: true}, "salt.function", "tgt", "larry")
	want := map[string]any{"name": "state", "changes": map[string]any{}, "result": nil, "comment": "Function state would be executed on target larry"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("test=True (-want +got):\n%s", d)
	}
	got = run1(t, larry, Options{}, "salt.function", "tgt", "larry")
	want = map[string]any{"name": "state", "changes": map[string]any{"ret": map[string]any{"larry": ""}}, "result": true,
		"comment": "Function ran successfully. Function state ran on larry.", "__jid__": "20170406104341210934"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ran (-want +got):\n%s", d)
	}
	got = run1(t, larry, Options{}, "salt.function", "tgt", "nobody")
	want = map[string]any{"name": "state", "changes": map[string]any{}, "result": false, "comment": "No minions responded"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("no minions (-want +got):\n%s", d)
	}
	bad := newFleet(map[string]map[string]any{"a1": {"return": "no", "retcode": 1}, "a2": {"return": false, "retcode": 0}})
	got = run1(t, bad, Options{}, "salt.function", "tgt", "*", "arg", "echo hi")
	if got["comment"] != "Running function state failed on minions: a1, a2 Function state ran on a1, a2." {
		t.Errorf("failed: got %q", got["comment"])
	}
	if w := fmt.Sprint(got["warnings"]); w != "[Please specify 'arg' as a list of arguments.]" || fmt.Sprint(bad.reqs[0].Arg) != "[echo hi]" {
		t.Errorf("arg as a string: warnings %s, arg %v", w, bad.reqs[0].Arg)
	}
}

// TestRunnerWheel pins saltmod.runner and saltmod.wheel (test_saltmod.py
// test_runner, test_wheel).
func TestRunnerWheel(t *testing.T) {
	f := newFleet(nil)
	f.runRes = map[string]any{"up": []any{"a1"}}
	got := run1(t, f, Options{}, "salt.runner", "arg", []any{"x"}, "removekeys", true, "require", []any{"y"})
	want := map[string]any{"name": "state", "changes": map[string]any{"return": f.runRes}, "result": true,
		"comment": "Runner function 'state' executed.", "__jid__": "20240101000000000001"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("runner (-want +got):\n%s", d)
	}
	if f.calls[0] != "runner state [x] map[removekeys:true]" {
		t.Errorf("runner call: got %q", f.calls[0])
	}
	got = run1(t, f, Options{}, "salt.wheel")
	if got["comment"] != "Wheel function 'state' executed." || got["result"] != true {
		t.Errorf("wheel: got %v", got)
	}
	// An orchestration runner's failure (its "data" fails check_result)
	// and a return with "Error" fail the step.
	f.runRes = map[string]any{"data": map[string]any{"m_master": map[string]any{"a": map[string]any{"result": false}}}, "retcode": 1}
	if got = run1(t, f, Options{}, "salt.runner"); got["result"] != false || got["comment"] != "Runner function 'state' failed." {
		t.Errorf("failed orchestration: got %v %q", got["result"], got["comment"])
	}
	f.runRes = map[string]any{"Error": "no"}
	if got = run1(t, f, Options{}, "salt.wheel"); got["result"] != false {
		t.Errorf("Error return: got %v", got["result"])
	}
	f.runRes, f.runErr = nil, fmt.Errorf("'x' is not available.")
	if got = run1(t, f, Options{}, "salt.runner"); got["result"] != false || fmt.Sprint(got["changes"]) != "map[return:'x' is not available.]" {
		t.Errorf("runner error: got %v", got)
	}
	if got = run1(t, f, Options{Test: true}, "salt.runner"); got["result"] != nil || got["comment"] != "Runner function 'state' would be executed." {
		t.Errorf("test: got %v", got)
	}
}

// TestWaitForEvent pins saltmod.wait_for_event (test_saltmod.py
// test_wait_for_event, test_wait_for_event_list_single_event).
func TestWaitForEvent(t *testing.T) {
	f := newFleet(nil)
	done := make(chan map[string]any)
	go func() {
		done <- run1(t, f, Options{}, "salt.wait_for_event", "name", "salt/minion/*/start", "id_list", []any{"a1", "a2", "a3"}, "timeout", 30)
	}()
	// Fire until the step has subscribed and seen them all.
	deadline := time.Now().Add(20 * time.Second)
	var got map[string]any
	for got == nil && time.Now().Before(deadline) {
		f.Fire("salt/minion/a1/start", map[string]any{"id": "a1"})
		f.Fire("salt/other", map[string]any{"id": "a2"})
		f.Fire("salt/minion/x/start", map[string]any{"data": map[string]any{"id": []any{"a2", "a3", "zz"}}})
		select {
		case got = <-done:
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got == nil {
		t.Fatal("wait_for_event did not return")
	}
	if got["result"] != true || !strings.HasPrefix(got["comment"].(string), "All events seen in ") {
		t.Errorf("got %v %q", got["result"], got["comment"])
	}
	if s := fmt.Sprint(got["changes"]); s != "map[minions_seen:[a1 a2 a3]]" {
		t.Errorf("changes: got %s", s)
	}
	got = run1(t, f, Options{}, "salt.wait_for_event", "name", "x", "id_list", []any{"a1"}, "timeout", 0.01)
	if got["result"] != false || got["comment"] != "Timeout value reached." {
		t.Errorf("timeout: got %v %q", got["result"], got["comment"])
	}
	got = run1(t, f, Options{Test: true}, "salt.wait_for_event", "name", "x", "id_list", []any{"a1"})
	if got["result"] != nil || got["comment"] != "Orchestration would wait for event 'x'" {
		t.Errorf("test: got %v", got)
	}
}

// TestApply runs orchestrations of test states through the engine:
// requisites, failhard, watch (test.mod_watch), run order.
func TestApply(t *testing.T) {
	step := func(id, fun string, kv ...any) state.Chunk {
		mod, fn, _ := strings.Cut(fun, ".")
		return chunk(append([]any{"state", mod, "fun", fn, "__id__", id, "name", id, "__sls__", "orch", "order", 0}, kv...)...)
	}
	tag := func(c state.Chunk) string { return state.Tag(c) }
	tests := []struct {
		name string
		low  []state.Chunk
		o    Options
		want map[string]string // id -> "result|comment" ("" for absent)
		ok   bool
	}{
		{name: "require-fails", low: []state.Chunk{
			step("a", "test.fail_without_changes"),
			step("b", "test.succeed_without_changes", "require", []any{map[string]any{"test": "a"}}),
			step("c", "test.succeed_without_changes"),
		}, want: map[string]string{"a": "false|Failure!", "b": "false|One or more requisite failed: orch.a", "c": "true|Success!"}},
		{name: "failhard-global", low: []state.Chunk{
			step("a", "test.fail_without_changes"), step("b", "test.nop"),
		}, o: Options{Failhard: true}, want: map[string]string{"a": "false|Failure!", "b": ""}},
		{name: "failhard-step", low: []state.Chunk{
			step("a", "test.succeed_without_changes"), step("b", "test.fail_with_changes", "failhard", true), step("c", "test.nop"),
		}, want: map[string]string{"a": "true|Success!", "b": "false|Failure!", "c": ""}},
		{name: "failhard-test-mode", low: []state.Chunk{
			step("a", "test.fail_without_changes", "failhard", true), step("b", "test.nop"),
		}, o: Options{Test: true}, want: map[string]string{"a": "false|If we weren't testing, this would be a failure!", "b": "true|Success!"}},
		{name: "onfail", low: []state.Chunk{
			step("a", "test.fail_without_changes"),
			step("rollback", "test.succeed_with_changes", "onfail", []any{"a"}),
			step("notify", "test.succeed_without_changes", "onfail", []any{"rollback"}),
		}, want: map[string]string{"a": "false|Failure!", "rollback": "true|Success!", "notify": "true|State was not run because onfail req did not change"}},
		{name: "onchanges", low: []state.Chunk{
			step("a", "test.succeed_with_changes"), step("b", "test.succeed_without_changes"),
			step("c", "test.nop", "onchanges", []any{"a"}), step("d", "test.nop", "onchanges", []any{"b"}),
		}, ok: true, want: map[string]string{"c": "true|Success!", "d": "true|State was not run because none of the onchanges reqs changed"}},
		{name: "watch", low: []state.Chunk{
			step("a", "test.succeed_with_changes"),
			step("w", "test.succeed_without_changes", "watch", []any{map[string]any{"test": "a"}}),
		}, ok: true, want: map[string]string{"w": "true|Watch statement fired."}},
		{name: "unsupported", low: []state.Chunk{step("a", "test.nop", "parallel", true)},
			want: map[string]string{"a": "false|parallel is not supported in an orchestration on Halite's master"}},
		{name: "unknown", low: []state.Chunk{step("a", "cmd.run")},
			want: map[string]string{"a": "false|State 'cmd.run' was not found in SLS 'orch'\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			running, err := Apply(context.Background(), newFleet(nil), state.Order(tt.low), tt.o)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.low {
				want, ok := tt.want[c.ID()]
				if !ok {
					continue
				}
				r, ran := running[tag(c)].(map[string]any)
				got := ""
				if ran {
					got = fmt.Sprintf("%v|%v", r["result"], r["comment"])
				}
				if got != want {
					t.Errorf("%s: got %q, want %q", c.ID(), got, want)
				}
			}
			if ok := CheckResult(map[string]any{"m_master": running}); ok != tt.ok {
				t.Errorf("CheckResult: got %v, want %v", ok, tt.ok)
			}
		})
	}
}

// TestCheckResult pins salt/utils/state.py check_result.
func TestCheckResult(t *testing.T) {
	tests := []struct {
		v    any
		want bool
	}{
		{nil, false}, {map[string]any{}, false}, {[]any{"error"}, false},
		{map[string]any{"m": []any{"Rendering SLS failed"}}, false},
		{map[string]any{"m": map[string]any{"s": map[string]any{"result": true}}}, true},
		{map[string]any{"m": map[string]any{"s": map[string]any{"result": nil}}}, true},
		{map[string]any{"m": map[string]any{"s": map[string]any{"result": false}}}, false},
		{map[string]any{"m": map[string]any{"s": map[string]any{"result": true}, "t": map[string]any{"result": false}}}, false},
	}
	for _, tt := range tests {
		if got := CheckResult(tt.v); got != tt.want {
			t.Errorf("CheckResult(%v): got %v, want %v", tt.v, got, tt.want)
		}
	}
}
