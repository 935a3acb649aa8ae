package state

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// The test states (salt/states/test.py): states that succeed or fail,
// with or without changes, for trying requisites and outputs.

func testChanges() map[string]any {
	return map[string]any{"testing": map[string]any{"old": "Unchanged", "new": "Something pretended to change"}}
}

// strArg returns a chunk argument as a string, def when absent.
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

// invalid is a state's SaltInvocationError, which Salt's State.call turns
// into a failed state.
func invalid(c *Call, msg string) state.Ret {
	return state.Ret{Name: c.Name, Result: state.False, Comment: "An exception occurred in this state: " + msg}
}

func init() {
	succeedWithout := func(_ context.Context, c *Call) state.Ret {
		return state.Ret{Name: c.Name, Result: state.True, Comment: strArg(c.Chunk, "comment", "Success!")}
	}
	Register("test.succeed_without_changes", Mod{Run: succeedWithout, Doc: "Returns successful."})
	Register("test.nop", Mod{Run: func(ctx context.Context, c *Call) state.Ret {
		return state.Ret{Name: c.Name, Result: state.True, Comment: "Success!"}
	}, Doc: "A no-op state that does nothing: a placeholder for requisites."})
	Register("test.fail_without_changes", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		r := state.Ret{Name: c.Name, Result: state.False, Comment: strArg(c.Chunk, "comment", "Failure!")}
		if c.Test {
			r.Comment = "If we weren't testing, this would be a failure!"
		}
		return r
	}, Doc: "Returns failure."})
	Register("test.succeed_with_changes", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		r := state.Ret{Name: c.Name, Result: state.True, Comment: strArg(c.Chunk, "comment", "Success!"), Changes: testChanges()}
		if c.Test {
			r.Result, r.Comment = state.None, "If we weren't testing, this would be successful with changes"
		}
		return r
	}, Doc: "Returns successful and changes is not empty."})
	Register("test.fail_with_changes", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		r := state.Ret{Name: c.Name, Result: state.False, Comment: strArg(c.Chunk, "comment", "Failure!"), Changes: testChanges()}
		if c.Test {
			r.Result, r.Comment = state.None, "If we weren't testing, this would be failed with changes"
		}
		return r
	}, Doc: "Returns failure and changes is not empty."})
	Register("test.show_notification", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		text, ok := c.Chunk["text"]
		if !ok || text == nil {
			return invalid(c, "Missing required argument text.")
		}
		return state.Ret{Name: c.Name, Result: state.True, Comment: fmt.Sprint(text)}
	}, Doc: "Simple notification using text argument."})
	Register("test.configurable_test_state", Mod{Run: configurable, Doc: `A configurable test state which determines its output based on the inputs:
changes (True, False or "Random"), result (True, False or "Random"), comment,
warnings.`})
	RegisterWatch("test", func(_ context.Context, c *Call) state.Ret {
		// test.mod_watch: the watched states that changed.
		has := []any{}
		tags := make([]string, 0, len(c.Watched))
		for t := range c.Watched {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		for _, t := range tags {
			if len(c.Watched[t]) > 0 {
				parts := strings.SplitN(t, "_|-", 3)
				if len(parts) >= 2 {
					has = append(has, parts[0]+": "+parts[1])
				}
			}
		}
		r := state.Ret{Name: c.Name, Result: state.True, Comment: strArg(c.Chunk, "comment", "Watch statement fired."),
			Changes: map[string]any{"Requisites with changes": has}}
		if v, ok := c.Chunk["result"]; ok {
			r.Result = state.ResultOf(v)
		}
		if v, ok := c.Chunk["changes"].(map[string]any); ok {
			r.Changes = v
		}
		return r
	})
}

// configurable is test.configurable_test_state.
func configurable(_ context.Context, c *Call) state.Ret {
	r := state.Ret{Name: c.Name, Result: state.False, Comment: strArg(c.Chunk, "comment", "")}
	changes, ok := c.Chunk["changes"]
	if !ok {
		changes = true
	}
	changed := false
	switch v := changes.(type) {
	case bool:
		changed = v
	case string:
		if strings.ToLower(v) != "random" {
			return invalid(c, "You have specified the state option 'changes' with invalid arguments. It must be either True, False, or 'Random'")
		}
		changed = rand.IntN(2) == 0
	default:
		return invalid(c, "You have specified the state option 'changes' with invalid arguments. It must be either True, False, or 'Random'")
	}
	if changed {
		r.Changes = testChanges()
	}
	result, ok := c.Chunk["result"]
	if !ok {
		result = true
	}
	switch v := result.(type) {
	case bool:
		if v {
			r.Result = state.True
		}
	case string:
		if strings.ToLower(v) != "random" {
			return invalid(c, "You have specified the state option 'result' with invalid arguments. It must be either True, False, or 'Random'")
		}
		if rand.IntN(2) == 0 {
			r.Result = state.True
		}
	default:
		return invalid(c, "You have specified the state option 'result' with invalid arguments. It must be either True, False, or 'Random'")
	}
	if c.Test {
		r.Result = state.None
		if changes == false {
			r.Result = state.True
		}
		if r.Comment == "" {
			r.Comment = "This is a test"
		}
	}
	return r
}
