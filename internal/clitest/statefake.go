package clitest

import (
	"context"
	"slices"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
)

// FakeStateFun is the state function RegisterFakeStateRun adds: one of
// those Salt prints with the highstate outputter (salt/modules/state.py
// __outputter__), chosen because no Halite agent implements it, so that the
// CLIs' scripts can print state returns without a state engine.
const FakeStateFun = "state.run_request"

// RegisterFakeStateRun registers FakeStateFun in this test binary's agents,
// unless an agent package already has it: it returns the state run named
// by its fixture= argument (StateFixtures), or fails when fixture=raise
// (as a state function that raises). Call it from an init function.
func RegisterFakeStateRun() {
	if slices.Contains(exec.New(exec.Options{Grains: grains.NewSkipped()}).Functions(), FakeStateFun) {
		return
	}
	exec.Register(FakeStateFun, "Test double: returns the state run fixture=NAME.",
		func(_ context.Context, _ any, req exec.Request) (any, error) {
			name, _ := req.Kwargs["fixture"].(string)
			if name == "raise" {
				return nil, exec.Commandf("the state run failed to start")
			}
			ret, ok := StateFixtures()[name]
			if !ok {
				return nil, exec.Invalidf("no state fixture %q", name)
			}
			return ret, nil
		})
}

func fakeState(id, name, comment string, run int, result any, changes map[string]any, dur float64) map[string]any {
	return map[string]any{
		"__id__": id, "__run_num__": run, "__sls__": "web", "name": name,
		"result": result, "comment": comment, "changes": changes,
		"start_time": "10:11:12.000100", "duration": dur,
	}
}

// StateFixtures are state returns shaped as Salt's: "mixed" (a change, a
// state without changes, a failure), "clean" (nothing changed), "test"
// (test=True: results None) and "errors" (compile errors, a list).
func StateFixtures() map[string]any {
	return map[string]any{
		"mixed": map[string]any{
			"file_|-motd_|-/etc/motd_|-managed": fakeState("motd", "/etc/motd", "File /etc/motd updated", 0, true,
				map[string]any{"diff": "--- \n+++ \n@@ -1 +1 @@\n-old\n+new\n"}, 12.5),
			"pkg_|-nginx_|-nginx_|-installed": fakeState("nginx", "nginx", "All specified packages are already installed", 1, true,
				map[string]any{}, 300),
			"cmd_|-migrate_|-/usr/bin/migrate_|-run": fakeState("migrate", "/usr/bin/migrate", "Command \"/usr/bin/migrate\" run", 2, false,
				map[string]any{"pid": 42, "retcode": 2, "stderr": "no database", "stdout": ""}, 700),
		},
		"clean": map[string]any{
			"pkg_|-nginx_|-nginx_|-installed": fakeState("nginx", "nginx", "All specified packages are already installed", 0, true,
				map[string]any{}, 1.25),
		},
		"test": map[string]any{
			"file_|-motd_|-/etc/motd_|-managed": fakeState("motd", "/etc/motd", "The file /etc/motd is set to be changed", 0, nil,
				map[string]any{"diff": "-old\n+new"}, 2),
		},
		"errors": []any{"Rendering SLS 'base:web' failed: mapping values are not allowed here; line 3"},
	}
}
