package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/agent/exec"
)

func stateOf(t *testing.T, sls string) map[string]any {
	t.Helper()
	low := lowFrom(t, sls)
	l := make([]any, len(low))
	for i, c := range low {
		l[i] = map[string]any(c)
	}
	return map[string]any{"low": l, "mods": []any{"requisite"}, "saltenv": "base"}
}

func runJob(h *testHost, fun string, args []any, kw map[string]any) exec.Result {
	return h.ex.Run(context.Background(), exec.Request{JID: "20261124000000000001", Fun: fun, Args: args, Kwargs: kw})
}

// state.apply runs the compiled __state__; a failed state makes retcode 2
// (salt/modules/state.py _set_retcode: EX_STATE_FAILURE), compile errors
// are returned as a list with retcode 1 and nothing runs.
func TestApplyRetcodes(t *testing.T) {
	h := newEngineHost(t)
	res := runJob(h, "state.apply", nil, map[string]any{"__state__": stateOf(t, "a:\n  test.succeed_with_changes\n")})
	if res.Retcode != 0 || !res.Success {
		t.Errorf("succeeding states: retcode %d success %v: %v", res.Retcode, res.Success, res.Return)
	}
	res = runJob(h, "state.apply", nil, map[string]any{"__state__": stateOf(t, "a:\n  test.fail_without_changes\n")})
	if res.Retcode != 2 || res.Success {
		t.Errorf("a failed state: retcode %d success %v, want 2 false", res.Retcode, res.Success)
	}
	st := stateOf(t, "a:\n  fakefile.present:\n    - name: "+filepath.Join(h.dir, "never")+"\n")
	st["errors"] = []any{"Rendering SLS 'base:web' failed: web.sls:3: mapping values are not allowed"}
	res = runJob(h, "state.apply", nil, map[string]any{"__state__": st})
	if res.Retcode != 1 || fmt.Sprint(res.Return) != "[Rendering SLS 'base:web' failed: web.sls:3: mapping values are not allowed]" {
		t.Errorf("compile errors: retcode %d return %v", res.Retcode, res.Return)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "never")); err == nil {
		t.Errorf("a job with compile errors ran its states")
	}
	// state.test and test=True in the compiled data both test.
	for _, c := range []struct {
		fun string
		st  map[string]any
	}{{"state.test", stateOf(t, "a:\n  test.succeed_with_changes\n")}, {"state.apply", stateOf(t, "a:\n  test.succeed_with_changes\n")}} {
		if c.fun == "state.apply" {
			c.st["test"] = true
		}
		res = runJob(h, c.fun, nil, map[string]any{"__state__": c.st})
		r := res.Return.(map[string]any)["test_|-a_|-a_|-succeed_with_changes"].(map[string]any)
		if r["result"] != nil {
			t.Errorf("%s test: result %v, want None", c.fun, r["result"])
		}
	}
}

// A job compiled for other devices is refused (the states contract's
// __for__).
func TestForRefused(t *testing.T) {
	h := newEngineHost(t)
	st := stateOf(t, "a:\n  test.succeed_with_changes\n")
	res := runJob(h, "state.apply", nil, map[string]any{"__state__": st, "__for__": []any{"other1", "other2"}})
	if res.Success || !strings.Contains(fmt.Sprint(res.Return), "compiled for other devices, not dev1") {
		t.Errorf("refusal: %v %v", res.Success, res.Return)
	}
	res = runJob(h, "state.apply", nil, map[string]any{"__state__": st, "__for__": []any{"other1", "dev1"}})
	if !res.Success {
		t.Errorf("a job for this device: %v", res.Return)
	}
}

// One state run at a time: a second is refused with Salt's sentence
// (salt/modules/state.py running, _check_queue), queue=True waits.
func TestOneRunAtATime(t *testing.T) {
	h := newEngineHost(t)
	slow := stateOf(t, "s:\n  fakesleep.ms:\n    - ms: 400\n")
	done := make(chan exec.Result)
	go func() {
		done <- h.ex.Run(context.Background(), exec.Request{JID: "20261124000000000001", Fun: "state.apply", Kwargs: map[string]any{"__state__": slow}})
	}()
	deadline := time.Now().Add(2 * time.Second)
	for len(h.ex.Running()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	quick := stateOf(t, "q:\n  test.nop\n")
	res := h.ex.Run(context.Background(), exec.Request{JID: "20261124000000000002", Fun: "state.apply", Kwargs: map[string]any{"__state__": quick}})
	l, ok := res.Return.([]any)
	if !ok || len(l) != 1 || res.Retcode != 1 ||
		!strings.HasPrefix(l[0].(string), `The function "state.apply" is running as PID `) ||
		!strings.HasSuffix(l[0].(string), " and was started at 2026, Nov 24 00:00:00.000001 with jid 20261124000000000001") {
		t.Errorf("second run: retcode %d return %#v", res.Retcode, res.Return)
	}
	run := h.ex.Run(context.Background(), exec.Request{JID: "20261124000000000003", Fun: "state.running"})
	if l, _ := run.Return.([]any); len(l) != 1 {
		t.Errorf("state.running: %v", run.Return)
	}
	start := time.Now()
	res = h.ex.Run(context.Background(), exec.Request{JID: "20261124000000000004", Fun: "state.apply", Kwargs: map[string]any{"__state__": quick, "queue": true}})
	if _, ok := res.Return.(map[string]any); !ok || !res.Success {
		t.Errorf("queued run: %v", res.Return)
	}
	first := <-done
	if !first.Success {
		t.Errorf("first run: %v", first.Return)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("the queued run did not wait")
	}
}

// state.single builds the chunk on the device (salt/modules/state.py
// single): name=..., the function's arguments, no SLS.
func TestSingle(t *testing.T) {
	h := newEngineHost(t)
	res := runJob(h, "state.single", []any{"test.succeed_with_changes"}, map[string]any{"name": "x", "comment": "hi"})
	r, ok := res.Return.(map[string]any)["test_|-x_|-x_|-succeed_with_changes"].(map[string]any)
	if !ok || r["result"] != true || r["comment"] != "hi" || !res.Success {
		t.Errorf("single: %v", res.Return)
	}
	res = runJob(h, "state.single", []any{"test.fail_without_changes", "y"}, nil)
	if res.Retcode != 2 {
		t.Errorf("failed single: retcode %d", res.Retcode)
	}
	res = runJob(h, "state.single", []any{"nosuch.thing"}, map[string]any{"name": "z"})
	if fmt.Sprint(res.Return) != "[Specified state 'nosuch.thing' was not found]" || res.Retcode != 1 {
		t.Errorf("unknown single: %v %d", res.Return, res.Retcode)
	}
	res = runJob(h, "state.single", []any{"nodot"}, map[string]any{"name": "z"})
	if res.Return != "Invalid function passed" || res.Retcode != 1 {
		t.Errorf("no dot: %v", res.Return)
	}
	res = runJob(h, "state.single", []any{"test.succeed_with_changes"}, map[string]any{"name": "x", "test": true})
	if r := res.Return.(map[string]any)["test_|-x_|-x_|-succeed_with_changes"].(map[string]any); r["result"] != nil {
		t.Errorf("single test=True: %v", r)
	}
}

// Salt's check_onfail_requisites: a failure handled by an onfail state
// with onfail_stop: False does not fail the run.
func TestCheckResultOnfailStop(t *testing.T) {
	sls := `
bad:
  test.fail_without_changes
handler:
  test.succeed_without_changes:
    - onfail:
      - test: bad
`
	h := newEngineHost(t)
	res := runJob(h, "state.apply", nil, map[string]any{"__state__": stateOf(t, sls)})
	if res.Retcode != 2 {
		t.Errorf("without onfail_stop: retcode %d, want 2", res.Retcode)
	}
	res = runJob(h, "state.apply", nil, map[string]any{"__state__": stateOf(t, sls+"    - onfail_stop: False\n")})
	if res.Retcode != 0 {
		t.Errorf("with onfail_stop False: retcode %d, want 0: %v", res.Retcode, res.Return)
	}
}

// show_* return what the master compiled.
func TestShow(t *testing.T) {
	h := newEngineHost(t)
	st := map[string]any{"top": map[string]any{"base": []any{"web"}}, "high": map[string]any{"a": map[string]any{}}, "low": []any{}}
	for fun, want := range map[string]string{"state.show_top": "map[base:[web]]", "state.show_highstate": "map[a:map[]]", "state.show_lowstate": "[]"} {
		res := runJob(h, fun, nil, map[string]any{"__state__": st})
		if fmt.Sprint(res.Return) != want {
			t.Errorf("%s: %v, want %s", fun, res.Return, want)
		}
	}
	res := runJob(h, "state.apply", nil, nil)
	if res.Success || !strings.Contains(fmt.Sprint(res.Return), "needs the states the master compiles") {
		t.Errorf("no __state__ with a master: %v", res.Return)
	}
}

// Masterless: the file_roots' SLS are compiled on the device; Jinja is
// refused in the default build, naming the file and line.
func TestMasterless(t *testing.T) {
	h := newEngineHost(t)
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "top.sls"), []byte("base:\n  'dev*':\n    - web\n  'other':\n    - nothere\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "web"), 0o755)
	os.WriteFile(filepath.Join(root, "web", "init.sls"), []byte("include:\n  - .conf\nw:\n  test.succeed_with_changes\n"), 0o644)
	os.WriteFile(filepath.Join(root, "web", "conf.sls"), []byte("c:\n  test.nop\n"), 0o644)
	os.WriteFile(filepath.Join(root, "tmpl.sls"), []byte("a:\n  test.nop:\n    - name: {{ grains['id'] }}\n"), 0o644)
	h.opts = map[string]any{"file_client": "local", "local": true, "file_roots": map[string]any{"base": []any{root}}}
	res := runJob(h, "state.apply", nil, nil)
	ret, ok := res.Return.(map[string]any)
	if !ok || len(ret) != 2 || !res.Success {
		t.Fatalf("highstate: %v", res.Return)
	}
	if _, ok := ret["test_|-c_|-c_|-nop"]; !ok {
		t.Errorf("relative include not applied: %v", keys(ret))
	}
	res = runJob(h, "state.show_top", nil, nil)
	if fmt.Sprint(res.Return) != "map[base:[web]]" {
		t.Errorf("show_top: %v", res.Return)
	}
	res = runJob(h, "state.sls", []any{"tmpl"}, nil)
	if jinjaRender == nil && (res.Retcode != 1 || !strings.Contains(fmt.Sprint(res.Return), "tmpl.sls:3: Jinja needs the -tags reactor build of halite-call; this SLS uses {{")) {
		t.Errorf("jinja in the default build: %v", res.Return)
	}
	res = runJob(h, "state.sls", []any{"nothere"}, nil)
	if res.Retcode != 1 || !strings.Contains(fmt.Sprint(res.Return), "No matching sls found for 'nothere' in env 'base'") {
		t.Errorf("missing sls: %v", res.Return)
	}
}
