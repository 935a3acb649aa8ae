package agent

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// lastReturn decodes the newest return in the agent's outbox.
func lastReturn(t *testing.T, a *Agent) *protocol.ReturnBody {
	t.Helper()
	a.out.spool.mu.Lock()
	defer a.out.spool.mu.Unlock()
	for i := len(a.out.spool.items) - 1; i >= 0; i-- {
		if it := a.out.spool.items[i]; it.kind == protocol.TypeReturn {
			b := new(protocol.ReturnBody)
			if err := protocol.Unmarshal(it.body, b); err != nil {
				t.Fatalf("spooled return: %v", err)
			}
			return b
		}
	}
	t.Fatal("no return in the outbox")
	return nil
}

// TestCompoundJob pins Salt's compound jobs on the minion
// (Minion._thread_multi_return in salt/minion.py): each function runs with
// its own arguments; the return is a dict keyed by function (a list with
// multifunc_ordered); a function that is not available fails its own entry
// and the others still run; the CLI's retcode is the largest of the
// functions' (SaltCMD._get_retcode in salt/cli/salt.py). Salt's minion
// puts a traceback in an unknown function's entry; the agent puts the
// "is not available" message of a single job there.
func TestCompoundJob(t *testing.T) {
	tests := []struct {
		name        string
		ordered     bool
		funs        []string
		args        [][]any
		kwargs      []map[string]any
		timeout     uint32
		wantReturn  any
		wantRetcode int
		wantFunArgs []any
	}{
		{
			name: "cmd.run and test.ping", funs: []string{"cmd.run", "test.ping"},
			args:       [][]any{{"echo hi"}, {}},
			wantReturn: map[string]any{"cmd.run": "hi", "test.ping": true}, wantFunArgs: []any{[]any{"echo hi"}, []any{}},
		},
		{
			name: "kwargs per function", funs: []string{"test.arg", "test.ping"},
			args: [][]any{{"a"}, nil}, kwargs: []map[string]any{{"k": "v"}, nil},
			wantReturn: map[string]any{
				"test.arg":  map[string]any{"args": []any{"a"}, "kwargs": map[string]any{"k": "v"}},
				"test.ping": true,
			},
			wantFunArgs: []any{[]any{"a", map[string]any{"k": "v", "__kwarg__": true}}, []any{}},
		},
		{
			name: "unknown function fails its entry only", funs: []string{"test.ping", "nosuch.fun", "test.echo"},
			args: [][]any{{}, {}, {"after"}},
			wantReturn: map[string]any{
				"test.ping": true, "nosuch.fun": "'nosuch.fun' is not available.", "test.echo": "after",
			},
			wantRetcode: 1, wantFunArgs: []any{[]any{}, []any{}, []any{"after"}},
		},
		{
			name: "largest retcode", funs: []string{"test.retcode", "test.retcode", "test.ping"},
			args:       [][]any{{int64(3)}, {int64(2)}, {}},
			wantReturn: map[string]any{"test.retcode": true, "test.ping": true}, wantRetcode: 3,
			wantFunArgs: []any{[]any{int64(3)}, []any{int64(2)}, []any{}},
		},
		{
			name: "same function twice keeps the last", funs: []string{"test.echo", "test.echo"},
			args:       [][]any{{"a"}, {"b"}},
			wantReturn: map[string]any{"test.echo": "b"}, wantFunArgs: []any{[]any{"a"}, []any{"b"}},
		},
		{
			name: "no argument lists", funs: []string{"test.ping", "test.retcode"},
			wantReturn: map[string]any{"test.ping": true, "test.retcode": true}, wantRetcode: 42,
			wantFunArgs: []any{[]any{}, []any{}},
		},
		{
			name: "multifunc_ordered", ordered: true, funs: []string{"test.echo", "test.echo", "nosuch.fun"},
			args:        [][]any{{"a"}, {"b"}, {}},
			wantReturn:  []any{"a", "b", "'nosuch.fun' is not available."},
			wantRetcode: 1, wantFunArgs: []any{[]any{"a"}, []any{"b"}, []any{}},
		},
		{
			name: "timeout bounds the whole job", funs: []string{"test.sleep", "test.ping"},
			args: [][]any{{int64(2)}, {}}, timeout: 1,
			wantReturn: map[string]any{
				"test.sleep": "ERROR: job 20261124000000000001 (test.sleep) timed out after 1s",
				"test.ping":  "ERROR: job 20261124000000000001 timed out after 1s, before test.ping ran",
			},
			wantRetcode: 1, wantFunArgs: []any{[]any{int64(2)}, []any{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAgent(t, "cam-01", nil, func(c *config.Agent) {
				c.MultifuncOrdered = tt.ordered
			})
			key := fakeMasterKey(t, a)
			b := &protocol.JobBody{
				JID: "20261124000000000001", Tgt: "*", TgtType: "glob", Fun: joinFuns(tt.funs),
				Funs: tt.funs, FunArgs: tt.args, FunKwargs: tt.kwargs, Timeout: tt.timeout,
			}
			a.handleJob(context.Background(), signJob(t, key, b))
			a.jobWG.Wait()
			got := lastReturn(t, a)
			if diff := cmp.Diff(tt.wantReturn, got.Return); diff != "" {
				t.Errorf("return differs (-want +got):\n%s", diff)
			}
			if got.Retcode != tt.wantRetcode || got.Success != (tt.wantRetcode == 0) {
				t.Errorf("got retcode %d, success %v; want %d, %v", got.Retcode, got.Success, tt.wantRetcode, tt.wantRetcode == 0)
			}
			if got.Fun != b.Fun {
				t.Errorf("got fun %q, want %q", got.Fun, b.Fun)
			}
			if diff := cmp.Diff(tt.wantFunArgs, got.FunArgs); diff != "" {
				t.Errorf("fun_args differ (-want +got):\n%s", diff)
			}
		})
	}
}

func joinFuns(funs []string) string {
	s := ""
	for i, f := range funs {
		if i > 0 {
			s += ","
		}
		s += f
	}
	return s
}
