package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/state"
)

// testHost is a Host whose Exec runs the agent's real execution functions
// (cmd.retcode runs real commands) and which records the events fired.
type testHost struct {
	id   string
	ex   *exec.Executor
	opts map[string]any
	dir  string

	mu     sync.Mutex
	events []string
	data   []map[string]any
}

func newEngineHost(t *testing.T) *testHost {
	t.Helper()
	h := &testHost{id: "dev1", dir: t.TempDir(), opts: map[string]any{}}
	h.ex = exec.New(exec.Options{ID: "dev1", Grains: grains.NewSkipped(), Host: h})
	return h
}

func (h *testHost) ID() string             { return h.id }
func (h *testHost) Grains() map[string]any { return map[string]any{"id": h.id} }
func (h *testHost) CacheDir() string       { return h.dir }
func (h *testHost) Opts() map[string]any   { return h.opts }
func (h *testHost) Running() []map[string]any {
	return h.ex.Running()
}
func (h *testHost) Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	res := h.ex.Run(ctx, exec.Request{JID: "1", Fun: fun, Args: args, Kwargs: kwargs})
	if !res.Success {
		return res.Return, fmt.Errorf("%v", res.Return)
	}
	return res.Return, nil
}
func (h *testHost) Fire(tag string, data map[string]any) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, tag)
	h.data = append(h.data, data)
	return nil
}

// lowFrom compiles SLS text (the file "requisite.sls") into chunks, in
// definition order, as the Salt tests write their states.
func lowFrom(t *testing.T, text string) []state.Chunk {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "requisite.sls"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := compileLocal(nil, map[string]any{"file_roots": map[string]any{"base": []any{dir}}}, []any{"requisite"}, map[string]any{}, "sls")
	if err != nil {
		t.Fatal(err)
	}
	if errs := errorsOf(st); len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	low, err := lowOf(st)
	if err != nil {
		t.Fatal(err)
	}
	return low
}

// brief is a state's return reduced as Salt's tests' normalize_ret does:
// run number, result, comment, and whether it changed.
type brief struct {
	RunNum  int
	Result  any
	Changes bool
	Comment string
}

func briefs(t *testing.T, ret map[string]any) map[string]brief {
	t.Helper()
	out := map[string]brief{}
	for tag, v := range ret {
		m := v.(map[string]any)
		n, _ := m["__run_num__"].(int)
		out[tag] = brief{RunNum: n, Result: m["result"], Changes: state.Truthy(m["changes"]), Comment: fmt.Sprint(m["comment"])}
	}
	return out
}

func applyText(t *testing.T, h Host, text string, o Options) map[string]any {
	t.Helper()
	ret, err := Run(context.Background(), h, lowFrom(t, text), o)
	if err != nil {
		t.Fatal(err)
	}
	return ret
}

func checkBriefs(t *testing.T, got map[string]any, want map[string]brief) {
	t.Helper()
	b := briefs(t, got)
	for tag, w := range want {
		g, ok := b[tag]
		if !ok {
			t.Errorf("%s: missing from the return; got %v", tag, keys(b))
			continue
		}
		if w.Comment == "" {
			w.Comment = g.Comment
		}
		if g != w {
			t.Errorf("%s:\n got  %+v\n want %+v", tag, g, w)
		}
	}
	if len(b) != len(want) {
		t.Errorf("got %d states, want %d: %v", len(b), len(want), keys(b))
	}
}

func keys[V any](m map[string]V) []string { return sortedKeys(m) }

// Salt: tests/pytests/functional/modules/state/requisites/test_prereq.py
// test_requisites_prereq_simple_ordering_and_errors_1, with test states
// for cmd.run (salt/state.py call_chunk, check_requisite, "prerequired").
func TestPrereqOrderingAndErrors(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
A:
  test.succeed_with_changes:
    - prereq_in:
      - test: C
B:
  test.succeed_with_changes:
    - prereq:
      - test: C
C:
  test.succeed_with_changes
I:
  test.succeed_with_changes:
    - prereq:
      - test: Z
J:
  test.succeed_with_changes:
    - prereq:
      - foobar: A
`, Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-A_|-A_|-succeed_with_changes": {RunNum: 2, Result: true, Changes: true},
		"test_|-B_|-B_|-succeed_with_changes": {RunNum: 0, Result: true, Changes: true},
		"test_|-C_|-C_|-succeed_with_changes": {RunNum: 1, Result: true, Changes: true},
		"test_|-I_|-I_|-succeed_with_changes": {RunNum: 3, Result: false,
			Comment: "The following requisites were not found:\n                   prereq:\n                       test: Z\n"},
		"test_|-J_|-J_|-succeed_with_changes": {RunNum: 4, Result: false,
			Comment: "The following requisites were not found:\n                   prereq:\n                       foobar: A\n"},
	})
}

// A prereq whose target would not change does not run: "No changes
// detected" (salt/state.py call_chunk, status "pre").
func TestPrereqNoChanges(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
stop:
  test.succeed_with_changes:
    - prereq:
      - test: target
target:
  test.succeed_without_changes
`, Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-stop_|-stop_|-succeed_with_changes":        {RunNum: 0, Result: true, Comment: "No changes detected"},
		"test_|-target_|-target_|-succeed_without_changes": {RunNum: 1, Result: true},
	})
}

// Salt: test_onfail.py test_requisites_onfail_all (exit 0 / exit 1 as
// test states).
func TestOnfailAll(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
a:
  test.succeed_with_changes
b:
  test.succeed_with_changes
c:
  test.succeed_with_changes
d:
  test.fail_with_changes
e:
  test.fail_with_changes
f:
  test.fail_with_changes
reqs not met:
  test.succeed_with_changes:
    - onfail_all:
      - test: a
      - test: e
reqs also not met:
  test.succeed_with_changes:
    - onfail_all:
      - test: a
      - test: b
      - test: c
reqs met:
  test.succeed_with_changes:
    - onfail_all:
      - test: d
      - test: e
      - test: f
reqs also met:
  test.succeed_with_changes:
    - onfail_all:
      - test: d
    - require:
      - test: a
`, Options{})
	notRun := "State was not run because onfail req did not change"
	checkBriefs(t, ret, map[string]brief{
		"test_|-a_|-a_|-succeed_with_changes":                                 {RunNum: 0, Result: true, Changes: true},
		"test_|-b_|-b_|-succeed_with_changes":                                 {RunNum: 1, Result: true, Changes: true},
		"test_|-c_|-c_|-succeed_with_changes":                                 {RunNum: 2, Result: true, Changes: true},
		"test_|-d_|-d_|-fail_with_changes":                                    {RunNum: 3, Result: false, Changes: true},
		"test_|-e_|-e_|-fail_with_changes":                                    {RunNum: 4, Result: false, Changes: true},
		"test_|-f_|-f_|-fail_with_changes":                                    {RunNum: 5, Result: false, Changes: true},
		"test_|-reqs not met_|-reqs not met_|-succeed_with_changes":           {RunNum: 6, Result: true, Comment: notRun},
		"test_|-reqs also not met_|-reqs also not met_|-succeed_with_changes": {RunNum: 7, Result: true, Comment: notRun},
		"test_|-reqs met_|-reqs met_|-succeed_with_changes":                   {RunNum: 8, Result: true, Changes: true},
		"test_|-reqs also met_|-reqs also met_|-succeed_with_changes":         {RunNum: 9, Result: true, Changes: true},
	})
}

// Salt: test_onchanges.py test_requisites_onchanges_any.
func TestOnchangesAny(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
changing_state:
  test.succeed_with_changes
another_changing_state:
  test.succeed_with_changes
non_changing_state:
  test.succeed_without_changes:
    - comment: non_changing_state not changed
another_non_changing_state:
  test.succeed_without_changes:
    - comment: another_non_changing_state not changed
test_one_changing_states:
  test.succeed_with_changes:
    - onchanges_any:
      - test: changing_state
      - test: another_changing_state
      - test: non_changing_state
      - test: another_non_changing_state
test_two_non_changing_states:
  test.succeed_with_changes:
    - onchanges_any:
      - test: non_changing_state
      - test: another_non_changing_state
`, Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-changing_state_|-changing_state_|-succeed_with_changes":                            {RunNum: 0, Result: true, Changes: true},
		"test_|-another_changing_state_|-another_changing_state_|-succeed_with_changes":            {RunNum: 1, Result: true, Changes: true},
		"test_|-non_changing_state_|-non_changing_state_|-succeed_without_changes":                 {RunNum: 2, Result: true, Comment: "non_changing_state not changed"},
		"test_|-another_non_changing_state_|-another_non_changing_state_|-succeed_without_changes": {RunNum: 3, Result: true, Comment: "another_non_changing_state not changed"},
		"test_|-test_one_changing_states_|-test_one_changing_states_|-succeed_with_changes":        {RunNum: 4, Result: true, Changes: true},
		"test_|-test_two_non_changing_states_|-test_two_non_changing_states_|-succeed_with_changes": {RunNum: 5, Result: true,
			Comment: "State was not run because none of the onchanges reqs changed"},
	})
}

// Salt: test_require.py test_requisites_require_any_fail and the "One or
// more requisite failed" comment of call_chunk; a failed require names
// sls.id.
func TestRequireFailed(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
A:
  test.fail_without_changes
B:
  test.succeed_with_changes:
    - require:
      - test: A
C:
  test.succeed_with_changes:
    - require_any:
      - test: A
      - test: B
D:
  test.succeed_with_changes:
    - require_any:
      - test: A
`, Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-A_|-A_|-fail_without_changes": {RunNum: 0, Result: false, Comment: "Failure!"},
		"test_|-B_|-B_|-succeed_with_changes": {RunNum: 1, Result: false, Comment: "One or more requisite failed: requisite.A"},
		"test_|-C_|-C_|-succeed_with_changes": {RunNum: 2, Result: false, Comment: "One or more requisite failed: requisite.A, requisite.B"},
		"test_|-D_|-D_|-succeed_with_changes": {RunNum: 3, Result: false, Comment: "One or more requisite failed: requisite.A"},
	})
}

// Salt: test_require.py test_issue_38683_require_order_failhard_combination;
// and the global failhard option stops the run at the first failure
// (check_failhard), but never under test=True.
func TestFailhard(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
a:
  test.show_notification:
    - text: message
    - require:
      - test: b
    - order: 1
    - failhard: True
b:
  test.fail_with_changes:
    - failhard: True
`, Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-b_|-b_|-fail_with_changes": {RunNum: 0, Result: false, Changes: true, Comment: "Failure!"},
	})

	sls := `
one:
  test.succeed_without_changes
two:
  test.fail_without_changes
three:
  test.succeed_without_changes
`
	if got := applyText(t, newEngineHost(t), sls, Options{Failhard: true}); len(got) != 2 {
		t.Errorf("global failhard: got %v, want one and two only", keys(got))
	}
	if got := applyText(t, newEngineHost(t), sls, Options{Failhard: true, Test: true}); len(got) != 3 {
		t.Errorf("global failhard with test=True: got %v, want all three", keys(got))
	}
	if got := applyText(t, newEngineHost(t), sls, Options{}); len(got) != 3 {
		t.Errorf("no failhard: got %v, want all three", keys(got))
	}
}

// watch: a watched state that changed makes the module's mod_watch run
// (test.mod_watch, salt/states/test.py); one without changes does not.
func TestWatch(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
changes:
  test.succeed_with_changes
nochanges:
  test.succeed_without_changes
watcher:
  test.succeed_without_changes:
    - comment: custom
    - watch:
      - test: changes
      - test: nochanges
quiet:
  test.succeed_without_changes:
    - watch:
      - test: nochanges
`, Options{})
	w := ret["test_|-watcher_|-watcher_|-succeed_without_changes"].(map[string]any)
	if got := fmt.Sprint(w["changes"]); got != "map[Requisites with changes:[test: changes]]" || w["comment"] != "custom" {
		t.Errorf("watcher: got changes %s comment %v, want mod_watch's", got, w["comment"])
	}
	q := ret["test_|-quiet_|-quiet_|-succeed_without_changes"].(map[string]any)
	if state.Truthy(q["changes"]) || q["comment"] != "Success!" {
		t.Errorf("quiet: got %v, want the function's own return", q)
	}
}

// listen: the listener's mod_watch runs at the end of the run, under
// "listener_<id>" (salt/state.py call_listen); a missing listen target is
// a Listen_Error.
func TestListen(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
listener:
  test.succeed_without_changes:
    - listen:
      - test: changer
changer:
  test.succeed_with_changes
after:
  test.succeed_without_changes
bad:
  test.succeed_without_changes:
    - listen:
      - test: nowhere_id
`, Options{})
	l, ok := ret["test_|-listener_listener_|-listener_|-mod_watch"].(map[string]any)
	if !ok {
		t.Fatalf("no listener mod_watch in %v", keys(ret))
	}
	if l["__run_num__"].(int) <= ret["test_|-after_|-after_|-succeed_without_changes"].(map[string]any)["__run_num__"].(int) {
		t.Errorf("listener ran before the end of the run: %v", l)
	}
	if _, ok := ret["Listen_Error_|-listen_nowhere_id_|-listen_test_|-Listen_Error"]; !ok {
		t.Errorf("no Listen_Error for a missing listen target in %v", keys(ret))
	}
}

// unless, onlyif and creates run real commands through cmd.retcode
// (salt/state.py _run_check); check_cmd overrules the result
// (_run_check_cmd).
func TestRunChecks(t *testing.T) {
	h := newEngineHost(t)
	exists := filepath.Join(h.dir, "exists")
	os.WriteFile(exists, nil, 0o644)
	ret := applyText(t, h, fmt.Sprintf(`
unless_true:
  test.succeed_with_changes:
    - unless: "true"
unless_false:
  test.succeed_with_changes:
    - unless: "false"
onlyif_false:
  test.succeed_with_changes:
    - onlyif:
      - "true"
      - "false"
onlyif_true:
  test.succeed_with_changes:
    - onlyif: "test -e %[1]s"
onlyif_fun:
  test.succeed_with_changes:
    - onlyif:
      - fun: file.file_exists
        args:
          - %[1]s.missing
unless_fun:
  test.succeed_with_changes:
    - unless:
      - fun: file.file_exists
        path: %[1]s
creates_there:
  test.succeed_with_changes:
    - creates: %[1]s
creates_missing:
  test.succeed_with_changes:
    - creates:
      - %[1]s
      - %[1]s.missing
check_fails:
  test.succeed_with_changes:
    - check_cmd:
      - "false"
check_ok:
  test.fail_without_changes:
    - check_cmd: "true"
`, exists), Options{})
	checkBriefs(t, ret, map[string]brief{
		"test_|-unless_true_|-unless_true_|-succeed_with_changes":         {RunNum: 0, Result: true, Comment: "unless condition is true"},
		"test_|-unless_false_|-unless_false_|-succeed_with_changes":       {RunNum: 1, Result: true, Changes: true, Comment: "Success!"},
		"test_|-onlyif_false_|-onlyif_false_|-succeed_with_changes":       {RunNum: 2, Result: true, Comment: "onlyif condition is false"},
		"test_|-onlyif_true_|-onlyif_true_|-succeed_with_changes":         {RunNum: 3, Result: true, Changes: true, Comment: "Success!"},
		"test_|-onlyif_fun_|-onlyif_fun_|-succeed_with_changes":           {RunNum: 4, Result: true, Comment: "onlyif condition is false"},
		"test_|-unless_fun_|-unless_fun_|-succeed_with_changes":           {RunNum: 5, Result: true, Comment: "unless condition is true"},
		"test_|-creates_there_|-creates_there_|-succeed_with_changes":     {RunNum: 6, Result: true, Comment: exists + " exists"},
		"test_|-creates_missing_|-creates_missing_|-succeed_with_changes": {RunNum: 7, Result: true, Changes: true, Comment: "Success!"},
		"test_|-check_fails_|-check_fails_|-succeed_with_changes":         {RunNum: 8, Result: false, Changes: true, Comment: "check_cmd determined the state failed"},
		"test_|-check_ok_|-check_ok_|-fail_without_changes":               {RunNum: 9, Result: true, Comment: "check_cmd determined the state succeeded"},
	})
	if ret["test_|-unless_true_|-unless_true_|-succeed_with_changes"].(map[string]any)["skip_watch"] != true {
		t.Errorf("unless true: no skip_watch")
	}
}

// fakeWrites is a state module that writes its name's file unless under
// test; it proves test=True changes nothing.
var fakeWrites atomic.Int32

func init() {
	Register("fakefile.present", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		if _, err := os.Stat(c.Name); err == nil {
			return state.Ret{Name: c.Name, Result: state.True, Comment: "present"}
		}
		r := state.Ret{Name: c.Name, Changes: map[string]any{"new": c.Name}}
		if c.Test {
			r.Result, r.Comment = state.None, "would be written"
			return r
		}
		fakeWrites.Add(1)
		os.WriteFile(c.Name, []byte("x"), 0o644)
		r.Result = state.True
		return r
	}})
	Register("fakepanic.now", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		var m map[string]int
		m[c.Name]++ // assignment to a nil map: a panic
		return state.Ret{}
	}})
	Register("fakesleep.ms", Mod{Run: func(ctx context.Context, c *Call) state.Ret {
		n, _ := toInt(c.Chunk["ms"])
		select {
		case <-time.After(time.Duration(n) * time.Millisecond):
		case <-ctx.Done():
		}
		return state.Ret{Name: c.Name, Result: state.True, Comment: "slept"}
	}})
}

// test=True: modules change nothing, results are None where something
// would change, and the prereq pass of a state is a test run too.
func TestTestChangesNothing(t *testing.T) {
	h := newEngineHost(t)
	f1, f2 := filepath.Join(h.dir, "f1"), filepath.Join(h.dir, "f2")
	before := fakeWrites.Load()
	ret := applyText(t, h, fmt.Sprintf(`
one:
  fakefile.present:
    - name: %s
two:
  fakefile.present:
    - name: %s
    - require:
      - fakefile: one
three:
  test.succeed_with_changes
four:
  test.fail_with_changes
`, f1, f2), Options{Test: true})
	if n := fakeWrites.Load() - before; n != 0 {
		t.Errorf("test=True wrote %d files", n)
	}
	for _, f := range []string{f1, f2} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("test=True made %s", f)
		}
	}
	for tag, v := range ret {
		if r := v.(map[string]any)["result"]; r != nil {
			t.Errorf("%s: result %v under test=True, want None", tag, r)
		}
	}
	// The same states for real write both files.
	applyText(t, h, fmt.Sprintf("one:\n  fakefile.present:\n    - name: %s\n", f1), Options{})
	if _, err := os.Stat(f1); err != nil {
		t.Errorf("the real run did not write %s: %v", f1, err)
	}
}

// A state module that panics fails that state only; an unknown state
// function fails naming itself and its SLS (salt/state.py verify_data).
func TestPanicAndUnknown(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
boom:
  fakepanic.now
missing:
  nosuch.function
after:
  test.succeed_without_changes
`, Options{})
	b := ret["fakepanic_|-boom_|-boom_|-now"].(map[string]any)
	if b["result"] != false || !strings.HasPrefix(b["comment"].(string), "An exception occurred in this state: panic: assignment to entry in nil map") {
		t.Errorf("panicking state: got %v", b)
	}
	m := ret["nosuch_|-missing_|-missing_|-function"].(map[string]any)
	if m["result"] != false || m["comment"] != "State 'nosuch.function' was not found in SLS 'requisite'\n" {
		t.Errorf("unknown function: got %q", m["comment"])
	}
	if a := ret["test_|-after_|-after_|-succeed_without_changes"].(map[string]any); a["result"] != true {
		t.Errorf("the state after a panic did not run: %v", a)
	}
}

// parallel: True states run at once; a state that requires one waits for
// its result (salt/state.py call_parallel, reconcile_procs; Salt's
// test_require.py test_parallel_state_with_requires).
func TestParallel(t *testing.T) {
	var b strings.Builder
	for i := range 4 {
		fmt.Fprintf(&b, "p%d:\n  fakesleep.ms:\n    - ms: 200\n    - parallel: True\n", i)
	}
	b.WriteString("after:\n  test.succeed_without_changes:\n    - require:\n      - fakesleep: p3\n")
	start := time.Now()
	ret := applyText(t, newEngineHost(t), b.String(), Options{})
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Errorf("4 parallel states of 200 ms took %v", d)
	}
	for i := range 4 {
		p := ret[fmt.Sprintf("fakesleep_|-p%d_|-p%d_|-ms", i, i)].(map[string]any)
		if p["result"] != true || p["comment"] != "slept" || p["__parallel__"] != true {
			t.Errorf("p%d: %v", i, p)
		}
		if _, ok := p["proc"]; ok {
			t.Errorf("p%d: proc left in the return", i)
		}
	}
	if a := ret["test_|-after_|-after_|-succeed_without_changes"].(map[string]any); a["result"] != true {
		t.Errorf("after: %v", a)
	}
}

// A cancelled context (job timeout, saltutil.kill_job) stops the run
// between states.
func TestCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	low := lowFrom(t, `
first:
  fakesleep.ms:
    - ms: 50
second:
  test.succeed_without_changes
`)
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	ret, err := Run(ctx, newEngineHost(t), low, Options{})
	if err == nil {
		t.Errorf("no error from a cancelled run")
	}
	if _, ran := ret["test_|-second_|-second_|-succeed_without_changes"]; ran {
		t.Errorf("the state after the cancel ran: %v", keys(ret))
	}
}

// Recursive requisites fail the state (salt/state.py call_chunk).
func TestRecursiveRequisite(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
A:
  test.succeed_without_changes:
    - require:
      - test: B
B:
  test.succeed_without_changes:
    - require:
      - test: A
`, Options{})
	found := false
	for _, v := range ret {
		if v.(map[string]any)["comment"] == "Recursive requisite found" {
			found = true
		}
	}
	if !found {
		t.Errorf("no Recursive requisite found in %v", ret)
	}
}

// state_events fires salt/job/<jid>/prog/<id>/<run_num> with {ret, len}
// after each state (salt/state.py State.event); a local run fires none.
func TestStateEvents(t *testing.T) {
	h := newEngineHost(t)
	applyText(t, h, "a:\n  test.nop\nb:\n  test.nop\n", Options{StateEvents: true, JID: "20261124000000000000"})
	want := []string{"salt/job/20261124000000000000/prog/dev1/0", "salt/job/20261124000000000000/prog/dev1/1"}
	if fmt.Sprint(h.events) != fmt.Sprint(want) {
		t.Errorf("events: got %v, want %v", h.events, want)
	}
	if h.data[0]["len"] != 2 || h.data[0]["ret"].(map[string]any)["__id__"] != "a" {
		t.Errorf("event data: %v", h.data[0])
	}
	h2 := newEngineHost(t)
	applyText(t, h2, "a:\n  test.nop\n", Options{StateEvents: true, Local: true})
	if len(h2.events) != 0 {
		t.Errorf("a local run fired %v", h2.events)
	}
}

func TestFnmatch(t *testing.T) {
	for _, c := range []struct {
		name, pat string
		want      bool
	}{
		{"/etc/motd", "/etc/*", true}, {"/etc/a/motd", "*motd", true}, {"web1", "web?", true},
		{"web10", "web?", false}, {"web1", "web[0-9]", true}, {"webx", "web[!x]", false},
		{"abc", "a*c*", true}, {"a", "", false}, {strings.Repeat("a", 60), strings.Repeat("*a", 30) + "b", false},
	} {
		if got := fnmatch(c.name, c.pat); got != c.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", c.name, c.pat, got, c.want)
		}
	}
}
