package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/protocol"
)

// runCompound runs the functions of a compound job (b.Funs) one after the
// other, as Minion._thread_multi_return in salt/minion.py does, and
// returns their results as one: the return is a map of each function's
// return by its name (a function named twice keeps its last return), or,
// with multifunc_ordered, a list in the order of Funs; the retcode is the
// largest of the functions' (what salt's CLI makes of Salt's retcode map,
// SaltCMD._get_retcode in salt/cli/salt.py), and the job succeeds when
// every function did. A function that is not available fails its own
// entry only. funArgs is Salt's "fun_args": one list of arguments per
// function, its kwargs as a last map with "__kwarg__": true.
//
// b.Timeout bounds the whole job: each function gets what is left of it,
// and those the job has no time left for are not run.
func (a *Agent) runCompound(ctx context.Context, b *protocol.JobBody) (res exec.Result, funArgs []any) {
	ordered := a.cfg.MultifuncOrdered
	byName := make(map[string]any, len(b.Funs))
	inOrder := make([]any, len(b.Funs))
	funArgs = make([]any, len(b.Funs))
	var deadline time.Time
	if b.Timeout > 0 {
		deadline = time.Now().Add(time.Duration(b.Timeout) * time.Second)
	}
	res.Success = true
	for i, fun := range b.Funs {
		req := exec.Request{JID: b.JID, Fun: fun, Tgt: b.Tgt, TgtType: b.TgtType, User: b.User}
		if b.FunArgs != nil && b.FunArgs[i] != nil {
			req.Args = b.FunArgs[i]
		} else {
			req.Args = []any{}
		}
		if b.FunKwargs != nil {
			req.Kwargs = b.FunKwargs[i]
		}
		funArgs[i] = req.SaltArgs()
		req.Timeout, req.Deadline = time.Duration(b.Timeout)*time.Second, deadline
		var r exec.Result
		if deadline.IsZero() || time.Now().Before(deadline) {
			r = a.exec.Run(ctx, req)
		} else {
			r = exec.Result{Retcode: exec.RetcodeGeneric,
				Return: fmt.Sprintf("ERROR: job %s timed out after %ds, before %s ran", b.JID, b.Timeout, fun)}
		}
		byName[fun], inOrder[i] = r.Return, r.Return
		res.Retcode = max(res.Retcode, r.Retcode)
		res.Success = res.Success && r.Success
	}
	if ordered {
		res.Return = inOrder
	} else {
		res.Return = byName
	}
	return res, funArgs
}
