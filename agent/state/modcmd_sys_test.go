package state

import (
	"context"
	"fmt"
	"testing"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/state"
)

// sysHost is a Host whose Exec runs the agent's real execution functions.
type sysHost struct {
	ex    *exec.Executor
	cache string
}

func newSysHost(t *testing.T) *sysHost {
	t.Helper()
	return &sysHost{ex: exec.New(exec.Options{ID: "stsys-test"}), cache: t.TempDir()}
}

func (h *sysHost) ID() string             { return "stsys-test" }
func (h *sysHost) Grains() map[string]any { return map[string]any{} }
func (h *sysHost) Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	r := h.ex.Run(ctx, exec.Request{JID: "20260101000000000000", Fun: fun, Args: args, Kwargs: kwargs})
	if !r.Success {
		return nil, fmt.Errorf("%v", r.Return)
	}
	return r.Return, nil
}
func (h *sysHost) Fire(string, map[string]any) error { return nil }
func (h *sysHost) CacheDir() string                  { return h.cache }

// sysCall runs the registered state function fun ("cmd.run") on a chunk
// made of kw, as the engine would.
func sysCall(t *testing.T, h Host, fun, name string, test bool, kw map[string]any) state.Ret {
	t.Helper()
	m, ok := Lookup(fun)
	if !ok {
		t.Fatalf("state function %s is not registered", fun)
	}
	return m.Run(context.Background(), sysCallOf(h, fun, name, test, kw))
}

func sysCallOf(h Host, fun, name string, test bool, kw map[string]any) *Call {
	ch := state.Chunk{"name": name, "__id__": name, "__sls__": "t", "__env__": "base"}
	for i := range fun {
		if fun[i] == '.' {
			ch["state"], ch["fun"] = fun[:i], fun[i+1:]
		}
	}
	for k, v := range kw {
		ch[k] = v
	}
	return &Call{Chunk: ch, Name: name, Test: test, Host: h}
}

// sysWatch runs module's mod_watch for a chunk of fun.
func sysWatch(t *testing.T, h Host, fun, name string, test bool, kw map[string]any) state.Ret {
	t.Helper()
	c := sysCallOf(h, fun, name, test, kw)
	w, ok := LookupWatch(c.Chunk.State())
	if !ok {
		t.Fatalf("no mod_watch for %s", c.Chunk.State())
	}
	return w(context.Background(), c)
}

func sysWant(t *testing.T, what string, got state.Ret, result state.Result, comment string) {
	t.Helper()
	if got.Result != result || (comment != "" && got.Comment != comment) {
		t.Fatalf("%s: got result %v comment %q changes %v, want result %v comment %q", what, got.Result.Value(), got.Comment, got.Changes, result.Value(), comment)
	}
}
