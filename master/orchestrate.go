package master

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/orch"
	"github.com/halite-fleet/halite/master/statecomp"
	"github.com/halite-fleet/halite/state"
)

// Orchestrate (salt/runners/state.py orchestrate): the SLS comes from
// file_roots and is compiled by the state compiler as the states of the
// master minion (Salt's MasterMinion, id "<master id>", "<host>_master"
// by default), then run here by package orch, whose steps publish
// through m.publish and wait for the returns as the CLI's publish does.

// orchestrateRunners are state.orchestrate and its Salt aliases.
func orchestrateRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{
		"state.orchestrate": m.runOrchestrate,
		"state.orch":        m.runOrchestrate,
		"state.sls":         m.runOrchestrate,
	}
}

// runOrchestrate is state.orchestrate mods [saltenv=base] [test=]
// [pillar={...}]: it returns Salt's {"data": {<master minion>: running},
// "outputter": "highstate", "retcode": 0|1}; running is the list of
// compile errors when the SLS does not compile.
func (m *Master) runOrchestrate(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	mods, ok := a.get(0, "mods")
	if !ok {
		return nil, badRequest("%s: missing required argument \"mods\"", req.Fun)
	}
	sreq, err := stateRequest(&api.Request{Fun: "state.sls", Arg: []any{mods}})
	if err != nil {
		return nil, badRequest("%s: %v", req.Fun, err)
	}
	if len(sreq.Mods) == 0 {
		return nil, badRequest("%s: no SLS given", req.Fun)
	}
	sreq.Saltenv = "base"
	if v, _ := a.str(1, "saltenv", false); v != "" {
		sreq.Saltenv = v
	}
	test := false
	if v, ok := a.get(2, "test"); ok && v != nil {
		b, ok := config.Bool(v)
		if !ok {
			return nil, badRequest("%s: test must be True or False, got %v", req.Fun, v)
		}
		test = b
		sreq.Test = b
	}
	if v, ok := a.get(4, "pillar"); ok && v != nil {
		p, ok := v.(map[string]any)
		if !ok {
			// salt/runners/state.py: SaltInvocationError.
			return nil, badRequest("Pillar data must be formatted as a dictionary")
		}
		sreq.Pillar = p
	}
	user := req.User
	if user == "" {
		user = "root"
	}
	jid := m.jids.Next() // Salt's orchestration_jid
	start := time.Now()
	results, _ := m.stateCompiler().Compile(sreq, []statecomp.Device{{ID: m.name, Grains: m.masterGrains()}})
	var running any
	if errs, _ := results[0].State["errors"].([]any); len(errs) > 0 {
		running = errs
	} else {
		l, _ := results[0].State["low"].([]any)
		low := make([]state.Chunk, 0, len(l))
		for _, c := range l {
			if cm, ok := c.(map[string]any); ok {
				low = append(low, state.Chunk(cm))
			}
		}
		running, err = orch.Apply(ctx, orchHost{m}, low, orch.Options{Test: test, Failhard: m.cfg.Failhard, JID: jid, User: user,
			OnStep: func(n, total int, tag string, r map[string]any) {
				progress(ctx, map[string]any{"message": fmt.Sprintf("step %d of %d: %s: %s", n, total, stepName(r), stepOutcome(r)),
					"step": n, "of": total, "id": tag, "result": r["result"]})
			}})
		if err != nil {
			return nil, fmt.Errorf("orchestrate %s: %w", strings.Join(sreq.Mods, ","), err)
		}
	}
	data := map[string]any{m.name: running}
	rc := 0
	if !orch.CheckResult(data) {
		rc = 1
	}
	m.log.Info("orchestration finished", zap.String("mods", strings.Join(sreq.Mods, ",")), zap.String("jid", jid),
		zap.Int("retcode", rc), zap.Duration("took", time.Since(start)))
	return map[string]any{"data": data, "outputter": "highstate", "retcode": rc}, nil
}

// masterGrains are the master minion's grains as far as templates need
// them.
func (m *Master) masterGrains() map[string]any {
	host, _ := os.Hostname()
	return map[string]any{"id": m.name, "host": host, "nodename": host, "kernel": strings.ToUpper(runtime.GOOS[:1]) + runtime.GOOS[1:],
		"os": runtime.GOOS, "cpuarch": runtime.GOARCH}
}

// orchHost is the master as package orch sees it.
type orchHost struct{ m *Master }

func (h orchHost) Expected(tgt, tgtType string) ([]string, map[string]bool, error) {
	minions, err := h.m.expected(tgt, tgtType, "")
	if err != nil {
		return nil, nil, err
	}
	conn := make(map[string]bool, len(minions))
	for _, id := range minions {
		conn[id] = h.m.minions.session(id) != nil
	}
	return minions, conn, nil
}

func (h orchHost) Cmd(ctx context.Context, req *api.Request, ret func(map[string]any)) (string, []string, error) {
	return h.cmdJID(ctx, req, nil, ret)
}

// cmdJID is Cmd; claim, if not nil, is told the job's id before it is
// published.
func (h orchHost) cmdJID(ctx context.Context, req *api.Request, claim func(jid string), ret func(map[string]any)) (string, []string, error) {
	m := h.m
	jid := m.jids.Next()
	if claim != nil {
		claim(jid)
	}
	sub := m.bus.Subscribe("salt/job/"+jid+"/ret/*", 1<<16)
	defer sub.Close()
	p, err := m.publish(jid, req)
	if err != nil {
		return "", nil, err
	}
	waiting := make(map[string]bool, len(p.minions))
	for _, id := range p.minions {
		waiting[id] = true
	}
	timeout := time.Duration(req.Timeout * float64(time.Second))
	if timeout <= 0 {
		timeout = time.Duration(m.cfg.Timeout) * time.Second
	}
	gather := time.Duration(m.cfg.GatherJobTimeout) * time.Second
	err = m.awaitReturns(ctx, sub, jid, req.User, timeout, gather, waiting, func(d map[string]any) error {
		ret(d)
		return nil
	})
	return jid, p.minions, err
}

func (h orchHost) Runner(ctx context.Context, fun string, arg []any, kwarg map[string]any, user string) (string, any, error) {
	fn, ok := h.m.runners()[fun]
	if !ok {
		return "", nil, fmt.Errorf("'%s' is not available.", fun)
	}
	return h.m.callAs(ctx, "run", fun, arg, kwarg, user, fn)
}

func (h orchHost) Wheel(ctx context.Context, fun string, arg []any, kwarg map[string]any, user string) (string, any, error) {
	fn, ok := h.m.wheel()[fun]
	if !ok {
		return "", nil, fmt.Errorf("'%s' is not available.", fun)
	}
	return h.m.callAs(ctx, "wheel", fun, arg, kwarg, user, fn)
}

func (h orchHost) Subscribe(pattern string) *event.Subscription {
	return h.m.bus.Subscribe(pattern, 4096)
}

func (h orchHost) Fire(tag string, data map[string]any) { h.m.bus.Publish(tag, data) }

// callAs runs a runner (kind "run") or wheel function as user, firing
// salt/<kind>/<jid>/new and /ret around it.
func (m *Master) callAs(ctx context.Context, kind, fun string, arg []any, kwarg map[string]any, user string, fn callFunc) (string, any, error) {
	jid := m.jids.Next()
	req := &api.Request{Fun: fun, Arg: arg, Kwarg: kwarg, User: user}
	m.bus.Publish("salt/"+kind+"/"+jid+"/new", callEvent(kind, fun, jid, user, arg, kwarg))
	res, err := safeCall(ctx, req, fn)
	m.bus.Publish("salt/"+kind+"/"+jid+"/ret", callRetEvent(kind, fun, jid, user, arg, kwarg, res, err))
	return jid, res, err
}

// stepName is an orchestration step's ID declaration.
func stepName(r map[string]any) string {
	if id, ok := r["__id__"].(string); ok && id != "" {
		return id
	}
	return fmt.Sprint(r["name"])
}

// stepOutcome says in a word how a step ended.
func stepOutcome(r map[string]any) string {
	switch r["result"] {
	case true:
		return "succeeded"
	case false:
		return "failed"
	}
	return "would change (test)"
}
