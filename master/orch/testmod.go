package orch

import (
	"context"
	"fmt"
	"sort"

	"github.com/halite-fleet/halite/state"
)

// The test states (salt/states/test.py), for placeholders and trying
// requisites in an orchestration.

func testChanges() map[string]any {
	return map[string]any{"testing": map[string]any{"old": "Unchanged", "new": "Something pretended to change"}}
}

func strArg(c state.Chunk, k, def string) string {
	v, ok := c[k]
	if !ok || v == nil {
		return def
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func init() {
	ret := func(c state.Chunk, result any, comment string, changes map[string]any) map[string]any {
		if changes == nil {
			changes = map[string]any{}
		}
		return map[string]any{"name": c["name"], "result": result, "comment": comment, "changes": changes}
	}
	register("test.nop", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		return ret(c, true, "Success!", nil)
	})
	register("test.succeed_without_changes", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		return ret(c, true, strArg(c, "comment", "Success!"), nil)
	})
	register("test.fail_without_changes", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		if x.O.Test {
			return ret(c, false, "If we weren't testing, this would be a failure!", nil)
		}
		return ret(c, false, strArg(c, "comment", "Failure!"), nil)
	})
	register("test.succeed_with_changes", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		if x.O.Test {
			return ret(c, nil, "If we weren't testing, this would be successful with changes", testChanges())
		}
		return ret(c, true, strArg(c, "comment", "Success!"), testChanges())
	})
	register("test.fail_with_changes", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		if x.O.Test {
			return ret(c, nil, "If we weren't testing, this would be failed with changes", testChanges())
		}
		return ret(c, false, strArg(c, "comment", "Failure!"), testChanges())
	})
	register("test.show_notification", func(_ context.Context, x *Exec, c state.Chunk) map[string]any {
		text, ok := c["text"]
		if !ok || text == nil {
			return ret(c, false, "An exception occurred in this state: Missing required argument text.", nil)
		}
		return ret(c, true, fmt.Sprint(text), nil)
	})
}

// testModWatch is test.mod_watch: the watched states that changed.
func testModWatch(c state.Chunk, low []state.Chunk, running map[string]map[string]any) map[string]any {
	var tags []string
	for _, kind := range []string{"watch", "watch_any"} {
		for _, ref := range state.Reqs(c, kind) {
			for _, j := range state.Matches(low, ref) {
				if r, ok := running[state.Tag(low[j])]; ok && state.Truthy(r["changes"]) {
					tags = append(tags, low[j].State()+": "+low[j].ID())
				}
			}
		}
	}
	sort.Strings(tags)
	has := make([]any, 0, len(tags))
	for i, t := range tags {
		if i == 0 || t != tags[i-1] {
			has = append(has, t)
		}
	}
	r := map[string]any{"name": c["name"], "result": true, "comment": strArg(c, "comment", "Watch statement fired."),
		"changes": map[string]any{"Requisites with changes": has}}
	if v, ok := c["result"]; ok {
		r["result"] = v
	}
	if v, ok := c["changes"].(map[string]any); ok {
		r["changes"] = v
	}
	return r
}

// CheckResult is Salt's salt/utils/state.py check_result(running): false
// for anything but a non-empty mapping, and for a mapping in which some
// state (looked for down nested mappings without a result) has result
// False. (Salt's onfail rescue applies only with the highstate data,
// which the orchestrate runner does not pass.)
func CheckResult(running any) bool {
	return checkResult(running, false, 0)
}

func checkResult(running any, recurse bool, depth int) bool {
	m, ok := running.(map[string]any)
	if !ok || len(m) == 0 || depth > 32 {
		return false
	}
	for id, v := range m {
		sr, isMap := v.(map[string]any)
		if !recurse && !isMap && !(id == "__extend__" && isList(v)) {
			return false
		}
		if !isMap {
			continue
		}
		result, has := sr["result"]
		if has && result == false {
			return false
		}
		if !has && !checkResult(sr, true, depth+1) {
			return false
		}
	}
	return true
}

func isList(v any) bool { _, ok := v.([]any); return ok }
