package exec

import (
	"context"
	"errors"
)

// ExtFunc is an execution function defined outside this package by a part
// of the agent that owns state of its own (beacons.*, saltutil.sync_*).
// host is the Options.Host of the Executor running it; req is the job as
// published, kwargs starting with "__" included (the master attaches data
// such as synced files under such keys).
type ExtFunc func(ctx context.Context, host any, req Request) (any, error)

// ErrNoHost is returned by an external function run by an Executor whose
// Options.Host does not provide what it needs.
var ErrNoHost = errors.New("not available here (no running agent)")

// Register adds an external function, fun being "module.function". It must
// be called from an init function; a duplicate name panics.
func Register(fun, doc string, run ExtFunc) {
	mod, name := splitFun(fun)
	register(module{name: mod, funcs: []function{{
		name: name, doc: doc, varargs: true, varkw: true,
		run: func(ctx context.Context, c *call) (any, error) {
			j := c.job
			req := Request{Fun: c.fun, Args: c.rest, Kwargs: c.kw}
			if j != nil {
				req = j.req
			}
			ret, err := run(ctx, c.e.host, req)
			if rc, ok := ret.(Retcode); ok {
				c.retcode = rc.Code
				ret = rc.Return
			}
			return ret, err
		},
	}}})
}

// Retcode is what an external function returns to set the job's retcode
// besides its return (Salt's __context__["retcode"], e.g. 2 for a state
// run with a failed state).
type Retcode struct {
	Return any
	Code   int
}

// Known reports whether fun is an execution function of this build.
func Known(fun string) bool {
	_, ok := registry[fun]
	return ok
}

// Running lists the running jobs as saltutil.running does (jid, fun, pid,
// _stamp, ...), oldest first: state.running and the state functions'
// one-run-at-a-time check read it.
func (e *Executor) Running() []map[string]any {
	out := []map[string]any{}
	for _, j := range e.running(nil) {
		out = append(out, j.(map[string]any))
	}
	return out
}

// Invalidf is Salt's SaltInvocationError for external functions: the
// call itself is wrong.
func Invalidf(format string, a ...any) error { return invalidf(format, a...) }

// Commandf is Salt's CommandExecutionError for external functions.
func Commandf(format string, a ...any) error { return commandf(format, a...) }

func splitFun(fun string) (string, string) {
	for i := len(fun) - 1; i >= 0; i-- {
		if fun[i] == '.' {
			return fun[:i], fun[i+1:]
		}
	}
	panic("exec: function name " + fun + " has no module")
}

// Busy reports whether a job running fun, or any function with the prefix
// fun when it ends with ".", is running (beacons' disable_during_state_run).
func (e *Executor) Busy(fun string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, j := range e.jobs {
		f := j.req.Fun
		if f == fun || (fun != "" && fun[len(fun)-1] == '.' && len(f) > len(fun) && f[:len(fun)] == fun) {
			return true
		}
	}
	return false
}
