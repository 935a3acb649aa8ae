package state

import (
	"context"
	"os"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// The event states (salt/states/event.py): event.send fires an event to
// the master's bus through the host; event.wait does it only from a watch
// (mod_watch).

func eventSend(_ context.Context, c *Call) state.Ret {
	r := state.Ret{Name: c.Name, Result: state.False}
	data, _ := c.Chunk["data"].(map[string]any)
	if v, ok := c.Chunk["show_changed"]; !ok || state.Truthy(v) {
		var d any = data
		if data == nil {
			d = c.Chunk["data"]
		}
		r.Changes = map[string]any{"tag": c.Name, "data": d}
	}
	if c.Test {
		r.Result, r.Comment = state.None, "Event would have been fired"
		return r
	}
	out := make(map[string]any, len(data)+2)
	for k, v := range data {
		out[k] = v
	}
	if state.Truthy(c.Chunk["with_grains"]) && c.Host != nil {
		out["grains"] = c.Host.Grains()
	}
	if state.Truthy(c.Chunk["with_env"]) {
		env := map[string]any{}
		for _, kv := range os.Environ() {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
		out["environ"] = env
	}
	if c.Host == nil {
		r.Comment = "Event not fired: no agent to send it"
		return r
	}
	if err := c.Host.Fire(c.Name, out); err != nil {
		r.Comment = "Event not fired: " + err.Error()
		return r
	}
	r.Result, r.Comment = state.True, "Event fired"
	return r
}

func init() {
	doc := `Send an event to the master: name is the tag, data a mapping; with_grains
adds the grains, with_env the environment; show_changed (default True)
shows the tag and data as the state's changes.`
	Register("event.send", Mod{Run: eventSend, Doc: doc})
	Register("event.fire_master", Mod{Run: eventSend, Doc: doc})
	Register("event.wait", Mod{Run: func(_ context.Context, c *Call) state.Ret {
		return state.Ret{Name: c.Name, Result: state.True}
	}, Doc: "Send an event only when a watched state changed (event.send as mod_watch)."})
	RegisterWatch("event", eventSend)
}
