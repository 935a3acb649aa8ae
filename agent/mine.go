package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// The mine on the agent (Salt's salt/modules/mine.py): mine.update runs
// the mine_functions and sends their results to the master as an event
// tagged "_minion_mine" (Salt's internal tag for the same hop), which goes
// through the outbox spool like every event, so data made while the master
// is away reach it later; the master keeps them (master/mine.go) and does
// not publish that event. mine.get asks the master with a MineGet on the
// session; the master answers with what this agent may read. A masterless
// agent keeps its own mine data in memory and mine.get reads them, as
// Salt's does with file_client: local.

// MineTag is the tag of the event that carries mine data to the master.
const MineTag = "_minion_mine"

// mineGetTimeout bounds how long mine.get waits for the master (under
// halite-call's 5 s deadline on the local socket).
const mineGetTimeout = 4 * time.Second

// mineState is the agent's side of mine.get: requests waiting for the
// master's MineData, and the masters' capability numbers.
type mineState struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan *protocol.MineData
	caps    map[*outbox]int
	local   map[string]any // masterless: the agent's own mine data
}

// setCaps records the capability number of the master behind out.
func (m *mineState) setCaps(out *outbox, caps int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.caps == nil {
		m.caps = make(map[*outbox]int)
	}
	m.caps[out] = caps
}

// mineReply hands a MineData to the mine.get waiting for it; one nobody
// waits for (late, or never asked) is dropped.
func (a *Agent) mineReply(d *protocol.MineData) {
	a.mine.mu.Lock()
	ch, ok := a.mine.waiting[d.Req]
	delete(a.mine.waiting, d.Req)
	a.mine.mu.Unlock()
	if !ok {
		a.log.Debug("mine data nobody waits for; dropped", zap.Uint64("req", d.Req))
		return
	}
	ch <- d
}

// mineFunction is one parsed mine_functions entry (Salt's
// salt/utils/mine.py parse_function_definition).
type mineFunction struct {
	alias, fun   string
	args         []any
	kwargs       map[string]any
	allowTgt     string
	allowTgtType string
}

// parseMineFunction parses one entry: alias -> list of args and one-key
// dicts, or a dict of kwargs; mine_function names the function behind an
// alias; allow_tgt/allow_tgt_type are the minion-side ACL.
func parseMineFunction(alias string, def any) (mineFunction, error) {
	f := mineFunction{alias: alias, kwargs: map[string]any{}}
	switch d := def.(type) {
	case nil:
	case map[string]any:
		for k, v := range d {
			f.kwargs[k] = v
		}
	case []any:
		for _, item := range d {
			if m, ok := item.(map[string]any); ok {
				for k, v := range m {
					f.kwargs[k] = v
				}
				continue
			}
			f.args = append(f.args, item)
		}
	default:
		return f, fmt.Errorf("mine_functions %s: expected a list of arguments or a mapping, got %v", alias, def)
	}
	f.fun = alias
	if v, ok := f.kwargs["mine_function"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return f, fmt.Errorf("mine_functions %s: mine_function must be a function name, got %v", alias, v)
		}
		f.fun = s
		delete(f.kwargs, "mine_function")
	}
	for k, dst := range map[string]*string{"allow_tgt": &f.allowTgt, "allow_tgt_type": &f.allowTgtType} {
		if v, ok := f.kwargs[k]; ok {
			s, ok := v.(string)
			if !ok {
				return f, fmt.Errorf("mine_functions %s: %s must be a string, got %v", alias, k, v)
			}
			*dst = s
			delete(f.kwargs, k)
		}
	}
	return f, nil
}

// checkMine checks mine_functions at start: a bad entry stops the agent;
// an unknown function is logged (mine.update skips it, as Salt's does).
// With a master and a mine_interval, mine.update is scheduled as Salt's
// minion does (the hidden job __mine_interval, run on start).
func (a *Agent) checkMine() error {
	for _, alias := range sortedNames(a.cfg.MineFunctions) {
		f, err := parseMineFunction(alias, a.cfg.MineFunctions[alias])
		if err != nil {
			return err
		}
		if !a.scheduleKnown(f.fun) {
			a.log.Warn("mine_functions: function not available; mine.update skips it", zap.String("function", f.fun))
		}
	}
	if a.masterless() || a.cfg.MineInterval <= 0 || len(a.cfg.MineFunctions) == 0 {
		return nil
	}
	// Salt's minion.py: __mine_interval, maxrunning 2, return_job
	// mine_return_job (default False).
	retJob, _ := a.cfg.Raw["mine_return_job"].(bool)
	return a.sched.Add("__mine_interval", map[string]any{
		"function": "mine.update", "minutes": a.cfg.MineInterval, "jid_include": true,
		"maxrunning": 2, "run_on_start": true, "return_job": retJob,
	})
}

// mineRun runs mine functions and returns their data by alias; a function
// that fails is logged and left out (it never stops the others).
func (a *Agent) mineRun(ctx context.Context, defs map[string]any) map[string]any {
	data := make(map[string]any, len(defs))
	for _, alias := range sortedNames(defs) {
		f, err := parseMineFunction(alias, defs[alias])
		if err != nil {
			a.log.Error("mine function skipped", zap.Error(err))
			continue
		}
		res := a.exec.Run(ctx, exec.Request{JID: a.jids.Next(), Fun: f.fun, Args: f.args, Kwargs: f.kwargs, User: "mine"})
		if !res.Success {
			a.log.Error("mine function failed; its mine data are not updated", zap.String("function", f.fun),
				zap.String("alias", alias), zap.Reflect("return", res.Return))
			continue
		}
		if f.allowTgt != "" {
			// salt/utils/mine.py wrap_acl_structure.
			w := map[string]any{"__data__": res.Return, "__saltmine_acl__": 1, "allow_tgt": f.allowTgt}
			if f.allowTgtType != "" {
				w["allow_tgt_type"] = f.allowTgtType
			}
			data[alias] = w
		} else {
			data[alias] = res.Return
		}
	}
	return data
}

// mineStore sends mine data to the master (Salt's _mine_store), or keeps
// them when masterless.
func (a *Agent) mineStore(load map[string]any) error {
	if a.masterless() {
		a.mine.mu.Lock()
		defer a.mine.mu.Unlock()
		switch load["cmd"] {
		case "_mine":
			if clear, _ := load["clear"].(bool); clear || a.mine.local == nil {
				a.mine.local = map[string]any{}
			}
			for k, v := range load["data"].(map[string]any) {
				a.mine.local[k] = v
			}
		case "_mine_delete":
			delete(a.mine.local, fmt.Sprint(load["fun"]))
		case "_mine_flush":
			a.mine.local = nil
		}
		return nil
	}
	return a.SendEvent(MineTag, load)
}

// mineAgent returns the running agent for the mine functions.
func mineAgent(host any) (*Agent, error) {
	a, ok := host.(*Agent)
	if !ok {
		return nil, exec.ErrNoHost
	}
	return a, nil
}

// mineGet asks the master for mine data.
func (a *Agent) mineGet(ctx context.Context, tgt, fun, tgtType string) (map[string]any, error) {
	if a.masterless() {
		return a.mineGetLocal(tgt, fun, tgtType)
	}
	var out *outbox
	a.mine.mu.Lock()
	for _, o := range a.outs {
		if a.mine.caps[o] >= protocol.CapMine {
			out = o
			break
		}
	}
	if out == nil {
		a.mine.mu.Unlock()
		if a.nconn.Load() == 0 {
			return nil, exec.Commandf("mine.get: no master connected")
		}
		return nil, exec.Commandf("mine.get: the master is too old to answer it (capability %d wanted)", protocol.CapMine)
	}
	if a.mine.waiting == nil {
		a.mine.waiting = make(map[uint64]chan *protocol.MineData)
	}
	a.mine.next++
	req := a.mine.next
	ch := make(chan *protocol.MineData, 1)
	a.mine.waiting[req] = ch
	a.mine.mu.Unlock()
	defer func() {
		a.mine.mu.Lock()
		delete(a.mine.waiting, req)
		a.mine.mu.Unlock()
	}()
	out.push(&protocol.MineGet{Req: req, Tgt: tgt, Fun: fun, TgtType: tgtType})
	t := time.NewTimer(mineGetTimeout)
	defer t.Stop()
	select {
	case d := <-ch:
		if d.Err != "" {
			return nil, exec.Commandf("mine.get: %s", d.Err)
		}
		if d.Data == nil {
			return map[string]any{}, nil
		}
		return d.Data, nil
	case <-t.C:
		return nil, exec.Commandf("mine.get: no answer from the master within %s", mineGetTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// mineGetLocal is mine.get on a masterless agent: its own data, if it
// matches the target (salt/modules/mine.py get, file_client local).
func (a *Agent) mineGetLocal(tgt, fun, tgtType string) (map[string]any, error) {
	ret := map[string]any{}
	m, err := targets.Compile(tgt, tgtType, targets.Options{})
	if err != nil {
		return nil, exec.Invalidf("mine.get: %v", err)
	}
	if !m.Match(&targets.Minion{ID: a.cfg.ID, Grains: a.grains.Get()}) {
		return ret, nil
	}
	funs := strings.Split(fun, ",")
	a.mine.mu.Lock()
	defer a.mine.mu.Unlock()
	for _, f := range funs {
		v, ok := a.mine.local[f]
		if !ok {
			continue
		}
		if w, ok := v.(map[string]any); ok && w["__saltmine_acl__"] != nil {
			v = w["__data__"]
		}
		if len(funs) > 1 {
			sub, _ := ret[f].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				ret[f] = sub
			}
			sub[a.cfg.ID] = v
		} else {
			ret[a.cfg.ID] = v
		}
	}
	return ret, nil
}

func boolKwarg(req exec.Request, name string) bool {
	switch v := req.Kwargs[name].(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

func init() {
	exec.Register("mine.update", `Run the mine_functions and send their data to the master (clear=True
replaces the agent's mine data instead of updating them; mine_functions=
runs only those). A function that fails is logged and skipped.

CLI Example:

    halite '*' mine.update`, func(ctx context.Context, host any, req exec.Request) (any, error) {
		a, err := mineAgent(host)
		if err != nil {
			return nil, err
		}
		defs := a.cfg.MineFunctions
		switch v := req.Kwargs["mine_functions"].(type) {
		case map[string]any:
			defs = v
		case []any:
			defs = map[string]any{}
			for _, f := range v {
				defs[fmt.Sprint(f)] = []any{}
			}
		}
		if len(defs) == 0 {
			return nil, nil // Salt: no mine functions, nothing to do
		}
		data := a.mineRun(ctx, defs)
		if err := a.mineStore(map[string]any{"cmd": "_mine", "data": data, "clear": boolKwarg(req, "clear")}); err != nil {
			return nil, exec.Commandf("mine.update: %v", err)
		}
		return true, nil
	})
	exec.Register("mine.send", `Run one function and send its data to the mine under its name (or the
alias given as name with mine_function=), with the arguments given;
allow_tgt and allow_tgt_type restrict who may read it.

CLI Example:

    halite '*' mine.send network.ip_addrs interface=eth0
    halite '*' mine.send eth0_ip_addrs mine_function=network.ip_addrs interface=eth0`,
		func(ctx context.Context, host any, req exec.Request) (any, error) {
			a, err := mineAgent(host)
			if err != nil {
				return nil, err
			}
			if len(req.Args) == 0 {
				return nil, exec.Invalidf("mine.send: a function name is required")
			}
			name := fmt.Sprint(req.Args[0])
			def := []any{}
			def = append(def, req.Args[1:]...)
			kw := map[string]any{}
			for k, v := range req.Kwargs {
				if !strings.HasPrefix(k, "__") {
					kw[k] = v
				}
			}
			if len(kw) > 0 {
				def = append(def, kw)
			}
			f, err := parseMineFunction(name, def)
			if err != nil {
				return nil, exec.Invalidf("%v", err)
			}
			if !a.scheduleKnown(f.fun) {
				return nil, exec.Invalidf("Function %s is not available", f.fun)
			}
			data := a.mineRun(ctx, map[string]any{name: def})
			if _, ok := data[name]; !ok {
				return nil, exec.Commandf("mine.send: %s failed (see the agent's log)", f.fun)
			}
			if err := a.mineStore(map[string]any{"cmd": "_mine", "data": data, "clear": false}); err != nil {
				return nil, exec.Commandf("mine.send: %v", err)
			}
			return true, nil
		})
	exec.Register("mine.get", `Get mine data from the master: TARGET FUNCTION [TGT_TYPE] (glob by
default). Several functions, comma-separated, give function -> id -> data.

CLI Example:

    halite '*' mine.get '*' network.ip_addrs`, func(ctx context.Context, host any, req exec.Request) (any, error) {
		a, err := mineAgent(host)
		if err != nil {
			return nil, err
		}
		get := func(i int, name, def string) string {
			if i < len(req.Args) {
				return fmt.Sprint(req.Args[i])
			}
			if v, ok := req.Kwargs[name]; ok {
				return fmt.Sprint(v)
			}
			return def
		}
		tgt, fun, tgtType := get(0, "tgt", ""), get(1, "fun", ""), get(2, "tgt_type", "glob")
		if tgt == "" || fun == "" {
			return nil, exec.Invalidf("mine.get: a target and a function are required")
		}
		return a.mineGet(ctx, tgt, fun, tgtType)
	})
	exec.Register("mine.delete", `Delete one function's data from this agent's mine on the master.

CLI Example:

    halite '*' mine.delete network.ip_addrs`, func(_ context.Context, host any, req exec.Request) (any, error) {
		a, err := mineAgent(host)
		if err != nil {
			return nil, err
		}
		if len(req.Args) == 0 {
			return nil, exec.Invalidf("mine.delete: a function name is required")
		}
		if err := a.mineStore(map[string]any{"cmd": "_mine_delete", "fun": fmt.Sprint(req.Args[0])}); err != nil {
			return nil, exec.Commandf("mine.delete: %v", err)
		}
		return true, nil
	})
	exec.Register("mine.flush", `Delete all of this agent's mine data on the master.

CLI Example:

    halite '*' mine.flush`, func(_ context.Context, host any, _ exec.Request) (any, error) {
		a, err := mineAgent(host)
		if err != nil {
			return nil, err
		}
		if err := a.mineStore(map[string]any{"cmd": "_mine_flush"}); err != nil {
			return nil, exec.Commandf("mine.flush: %v", err)
		}
		return true, nil
	})
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
