package exec

import (
	"context"

	"go.uber.org/zap"
)

// LocalCall returns a function that runs an execution function in this
// process: what the master's salt.cmd runner runs (master.LocalCall; Salt
// loads the minion's modules on the master for salt.cmd). id is the
// caller's id (the master's), version what test.version says.
func LocalCall(id, version string, log *zap.Logger) func(ctx context.Context, jid, fun string, args []any, kwargs map[string]any, user string) (any, bool) {
	ex := New(Options{ID: id, Version: version, Log: log})
	return func(ctx context.Context, jid, fun string, args []any, kwargs map[string]any, user string) (any, bool) {
		res := ex.Run(ctx, Request{JID: jid, Fun: fun, Args: args, Kwargs: kwargs, User: user})
		return res.Return, res.Success
	}
}
