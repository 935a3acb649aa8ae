package state

import (
	"fmt"
	"strings"
	"testing"
)

// module.run, new syntax and old (salt/states/module.py run, _run,
// _legacy_run), through the engine with the agent's real functions.
func TestModuleRun(t *testing.T) {
	h := newEngineHost(t)
	ret := applyText(t, h, `
new:
  module.run:
    - test.echo:
      - text: hello
    - test.ping: []
legacy:
  module.run:
    - name: test.echo
    - text: hi
missing:
  module.run:
    - nosuch.fun: []
legacy_missing:
  module.run:
    - name: nosuch.fun
failing:
  module.run:
    - test.retcode:
      - code: 3
`, Options{})
	get := func(tag string) map[string]any { return ret[tag].(map[string]any) }
	n := get("module_|-new_|-new_|-run")
	if n["result"] != true || n["comment"] != "test.echo: hello, test.ping: True" || fmt.Sprint(n["changes"]) != "map[test.echo:hello test.ping:true]" {
		t.Errorf("new syntax: %v", n)
	}
	l := get("module_|-legacy_|-test.echo_|-run")
	if l["result"] != true || l["comment"] != "Module function test.echo executed" || fmt.Sprint(l["changes"]) != "map[ret:hi]" {
		t.Errorf("legacy syntax: %v", l)
	}
	if m := get("module_|-missing_|-missing_|-run"); m["result"] != false || m["comment"] != "Unavailable function: nosuch.fun." {
		t.Errorf("missing (new): %v", m)
	}
	if m := get("module_|-legacy_missing_|-nosuch.fun_|-run"); m["result"] != false || m["comment"] != "Module function nosuch.fun is not available" {
		t.Errorf("missing (legacy): %v", m)
	}
	if f := get("module_|-failing_|-failing_|-run"); f["result"] != false || !strings.HasPrefix(f["comment"].(string), "'test.retcode' failed: ") {
		t.Errorf("failing function: %v", f)
	}

	ret = applyText(t, h, "new:\n  module.run:\n    - test.echo:\n      - text: hello\nlegacy:\n  module.run:\n    - name: test.echo\n    - text: hi\n", Options{Test: true})
	if c := ret["module_|-new_|-new_|-run"].(map[string]any); c["result"] != nil || c["comment"] != "Function test.echo to be executed." {
		t.Errorf("new syntax test=True: %v", c)
	}
	if c := ret["module_|-legacy_|-test.echo_|-run"].(map[string]any); c["result"] != nil || c["comment"] != "Module function test.echo is set to execute" {
		t.Errorf("legacy test=True: %v", c)
	}
}

// event.send fires through the host; test=True fires nothing
// (salt/states/event.py send).
func TestEventSend(t *testing.T) {
	h := newEngineHost(t)
	sls := "mycompany/status:\n  event.send:\n    - data:\n        status: half-way\n"
	ret := applyText(t, h, sls, Options{Test: true})
	if r := ret["event_|-mycompany/status_|-mycompany/status_|-send"].(map[string]any); r["result"] != nil || r["comment"] != "Event would have been fired" || len(h.events) != 0 {
		t.Errorf("test=True: %v, events %v", r, h.events)
	}
	ret = applyText(t, h, sls, Options{})
	r := ret["event_|-mycompany/status_|-mycompany/status_|-send"].(map[string]any)
	if r["result"] != true || r["comment"] != "Event fired" || fmt.Sprint(r["changes"]) != "map[data:map[status:half-way] tag:mycompany/status]" {
		t.Errorf("send: %v", r)
	}
	if fmt.Sprint(h.events) != "[mycompany/status]" || h.data[0]["status"] != "half-way" {
		t.Errorf("event: %v %v", h.events, h.data)
	}
}

// The test states under test=True (salt/states/test.py).
func TestTestStates(t *testing.T) {
	ret := applyText(t, newEngineHost(t), `
a:
  test.configurable_test_state:
    - changes: False
b:
  test.configurable_test_state:
    - changes: True
    - result: False
c:
  test.fail_without_changes
d:
  test.show_notification:
    - text: read me
e:
  test.configurable_test_state:
    - changes: sometimes
`, Options{Test: true})
	checkBriefs(t, ret, map[string]brief{
		"test_|-a_|-a_|-configurable_test_state": {RunNum: 0, Result: true, Comment: "This is a test"},
		"test_|-b_|-b_|-configurable_test_state": {RunNum: 1, Result: nil, Changes: true, Comment: "This is a test"},
		"test_|-c_|-c_|-fail_without_changes":    {RunNum: 2, Result: false, Comment: "If we weren't testing, this would be a failure!"},
		"test_|-d_|-d_|-show_notification":       {RunNum: 3, Result: true, Comment: "read me"},
		"test_|-e_|-e_|-configurable_test_state": {RunNum: 4, Result: false, Comment: "An exception occurred in this state: You have specified the state option 'changes' with invalid arguments. It must be either True, False, or 'Random'"},
	})
}
