package master

import (
	"context"
	"maps"
)

// progressKey holds, in a runner or wheel call's context, where the
// call's progress goes.
type progressKey struct{}

// withProgress gives a call's context the function its progress goes to.
func withProgress(ctx context.Context, f func(data map[string]any)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// progress reports a runner's progress, as a Salt runner does with
// __jid_event__.fire_event(data, "progress") (salt/utils/event.py
// NamespacedEvent, salt/runners/jobs.py): the master fires
// salt/run/<jid>/progress with data and, when the CLI asked for it
// (api.CallProgress), streams data to it. Outside a call it does nothing.
func progress(ctx context.Context, data map[string]any) {
	if f, ok := ctx.Value(progressKey{}).(func(map[string]any)); ok {
		f(maps.Clone(data))
	}
}
