// Package fleet answers the operator CLIs' shell completion from the
// master's local API (its complete operation, which fires no event):
// minion ids from the key store (the lists halite-key -L shows), the
// function names the master has seen from its agents, and its runners. Completion must stay quiet and
// quick: every error, and a master slower than a second, gives no
// candidates.
package fleet

import (
	"context"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
)

// timeout bounds one question to the master.
const timeout = time.Second

func call(configDir string, req *api.Request) any {
	cfg, err := config.LoadMaster(configDir, nil)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := api.Call(ctx, cfg.SocketPath(), req)
	if err != nil {
		return nil
	}
	return res
}

func strings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Keys returns the ids of the keys in the given lists of key.list_all
// (minions, minions_pre, minions_rejected, minions_denied, as
// key.list_all names them); none: all.
func Keys(configDir string, lists ...string) []string {
	all, _ := call(configDir, &api.Request{Op: api.OpComplete, Fun: "keys"}).(map[string]any)
	if len(lists) == 0 {
		lists = []string{"minions", "minions_pre", "minions_rejected", "minions_denied"}
	}
	var out []string
	for _, l := range lists {
		out = append(out, strings(all[l])...)
	}
	return out
}

// Functions returns the function names the master has seen from its
// agents.
func Functions(configDir string) []string {
	return strings(call(configDir, &api.Request{Op: api.OpComplete, Fun: "functions"}))
}

// Runners returns the master's runner names.
func Runners(configDir string) []string {
	return strings(call(configDir, &api.Request{Op: api.OpComplete, Fun: "runners"}))
}
