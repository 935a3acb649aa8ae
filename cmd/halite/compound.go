package main

import (
	"strings"

	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/master/api"
)

// splitCompound is how SaltCMDOptionParser._mixin_after_parsed
// (salt/utils/parsers.py) reads a compound command, a function word with
// commas in it: the functions are that word split on ",", and the words
// after it are split into one group of arguments per function at sep
// (--args-separator, default ","). When sep stands alone between the
// groups as often as there are functions less one ("new style"), those
// words are the only places it splits; otherwise ("old style") sep splits
// every word it is in, at each place, and empty pieces are dropped (so
// 'echo hi', ends cmd.run's group and gives test.ping an empty one), and
// the groups must then be as many as the functions (exit 42).
//
// funs is nil when fun has no comma: a job of one function.
func splitCompound(fun string, words []string, sep string) (funs []string, groups [][]string, err error) {
	if !strings.Contains(fun, ",") {
		return nil, nil, nil
	}
	if sep == "" {
		return nil, nil, cli.Usagef("--args-separator cannot be empty")
	}
	funs = strings.Split(fun, ",")
	groups = [][]string{{}}
	standalone := 0
	for _, w := range words {
		if w == sep {
			standalone++
		}
	}
	if standalone == len(funs)-1 {
		for _, w := range words {
			if w == sep {
				groups = append(groups, []string{})
				continue
			}
			groups[len(groups)-1] = append(groups[len(groups)-1], w)
		}
		return funs, groups, nil
	}
	for _, w := range words {
		if !strings.Contains(w, sep) {
			groups[len(groups)-1] = append(groups[len(groups)-1], w)
			continue
		}
		pieces := strings.Split(w, sep)
		for i, p := range pieces {
			if p != "" {
				groups[len(groups)-1] = append(groups[len(groups)-1], p)
			}
			if i != len(pieces)-1 {
				groups = append(groups, []string{})
			}
		}
	}
	switch {
	case len(funs) > len(groups):
		return nil, nil, &cli.UsageError{Msg: "Cannot execute compound command without defining all arguments.", Code: cli.ExitNoTarget}
	case len(funs) < len(groups):
		return nil, nil, &cli.UsageError{Msg: "Cannot execute compound command with more arguments than commands.", Code: cli.ExitNoTarget}
	}
	return funs, groups, nil
}

// setCompound puts a compound command's functions and their arguments,
// each group parsed as Salt's parse_input does, in req.
func setCompound(req *api.Request, funs []string, groups [][]string) {
	req.Funs, req.Fun, req.Arg, req.Kwarg = funs, strings.Join(funs, ","), nil, nil
	req.FunArgs = make([][]any, len(groups))
	kwargs := make([]map[string]any, len(groups))
	anyKwargs := false
	for i, g := range groups {
		req.FunArgs[i], kwargs[i] = cli.ParseFunArgs(g)
		anyKwargs = anyKwargs || kwargs[i] != nil
	}
	if anyKwargs {
		req.FunKwargs = kwargs
	}
}

// inSaltOrder is output.InSaltOrder for req's function, or, for a compound
// command, for each of its functions' returns, which come keyed by
// function in the order the functions ran, as Salt's dict keeps them
// (Minion._thread_multi_return in salt/minion.py), or, with the agent's
// multifunc_ordered, as a list in that order.
func inSaltOrder(req *api.Request, ret any) any {
	if len(req.Funs) == 0 {
		return output.InSaltOrder(req.Fun, req.Arg, ret)
	}
	args := func(i int) []any {
		if i < len(req.FunArgs) {
			return req.FunArgs[i]
		}
		return nil
	}
	switch r := ret.(type) {
	case map[string]any:
		values := make(map[string]any, len(r))
		for k, v := range r {
			values[k] = v
		}
		for i, fun := range req.Funs {
			if v, ok := r[fun]; ok {
				values[fun] = output.InSaltOrder(fun, args(i), v) // the last of a function named twice
			}
		}
		return output.Ordered{Keys: req.Funs, Values: values}
	case []any:
		if len(r) != len(req.Funs) {
			return ret
		}
		out := make([]any, len(r))
		for i, v := range r {
			out[i] = output.InSaltOrder(req.Funs[i], args(i), v)
		}
		return out
	}
	return ret
}
