package agent

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/reactor"
)

// The caller reactor: an agent without a master (file_client: local or
// master_type: disable) runs its own `reactor:` section against its own
// event bus, with caller reactions executed by its own modules.
//
// The default build reads reactor files as plain YAML (reactor.PlainYAML):
// Jinja (gonja) costs about 4 MiB, which the armv7 agent cannot spare. A
// build with -tags reactor renders Jinja as the master does (see
// reactor_jinja.go).

// reactorRenderer makes the renderer of caller reactor files; the reactor
// build tag replaces it.
var reactorRenderer = func(*Agent) reactor.Renderer { return reactor.PlainYAML{} }

// masterless reports whether the agent runs without a master.
func (a *Agent) masterless() bool {
	return a.cfg.FileClient == "local" || a.cfg.MasterType == "disable" || len(a.cfg.MasterAddrs()) == 0
}

// runReactor runs the caller reactor until ctx ends.
func (a *Agent) runReactor(ctx context.Context) error {
	rules, err := reactor.ParseConfig(a.cfg.Reactor)
	if err != nil {
		a.log.Error("reactor option ignored", zap.Error(err))
		return nil
	}
	e := reactor.New(reactor.Options{
		Rules:    rules,
		Files:    reactor.Files{Roots: map[string][]string{"base": {"/srv/salt"}}},
		Renderer: reactorRenderer(a),
		Dispatch: a.dispatchCaller,
		Types:    []string{reactor.TypeCaller},
		Fire:     a.bus.Publish,
		Workers:  2,
		Queue:    1000,
		Log:      a.log.Named("reactor"),
	})
	a.log.Info("caller reactor running", zap.Int("rules", len(rules)))
	return e.Run(ctx, a.bus)
}

// dispatchCaller runs a caller reaction with the agent's own modules.
func (a *Agent) dispatchCaller(ctx context.Context, r *reactor.Reaction) (string, error) {
	jid := fmt.Sprintf("%020d", time.Now().UnixMicro())
	r.Claim(jid)
	res := a.exec.Run(ctx, exec.Request{JID: jid, Fun: r.Fun, Args: r.Arg, Kwargs: r.Kwarg, User: "Reactor"})
	if a.rets != nil {
		a.rets.Return(jid, r.Fun, r.Arg, res)
	}
	if !res.Success || res.Retcode != 0 {
		return jid, fmt.Errorf("caller %s failed (retcode %d): %v", r.Fun, res.Retcode, res.Return)
	}
	return jid, nil
}

// FireLocal publishes an event on the agent's own bus only (halite-call
// event.fire), where the caller reactor sees it.
func (a *Agent) FireLocal(tag string, data map[string]any) error {
	if tag == "" {
		return fmt.Errorf("event tag is empty")
	}
	local := make(map[string]any, len(data)+1)
	for k, v := range data {
		local[k] = v
	}
	a.bus.Publish(tag, local)
	return nil
}
