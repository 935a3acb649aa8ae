package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/halite-fleet/halite/internal/batch"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/master/api"
)

// parseBatch checks -b/--batch-size (batch.Check).
func parseBatch(s string) error {
	if err := batch.Check(s); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

// collect runs req to the end and returns each minion's return data, the
// minions the master expected and those that did not return.
func collect(ctx context.Context, socket string, req *api.Request) (rets map[string]map[string]any, expected, missing []string, err error) {
	c, err := api.Dial(ctx, socket, req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer c.Close()
	rets = map[string]map[string]any{}
	for {
		r, err := c.Next()
		if err != nil {
			return nil, nil, nil, err
		}
		switch r.Kind {
		case api.KindError:
			return nil, nil, nil, &api.RemoteError{Code: r.Code, Msg: r.Error}
		case api.KindJob:
			expected = r.Minions
		case api.KindReturn:
			if id, ok := r.Data["id"].(string); ok {
				rets[id] = r.Data
			}
		}
		if r.Done {
			return rets, expected, r.Missing, nil
		}
	}
}

// subsetTargets is salt/client/__init__.py cmd_subset: ask the matched
// minions for sys.list_functions and keep a random n of those that have
// fun.
func subsetTargets(ctx context.Context, socket string, req *api.Request, n int) ([]string, error) {
	ls := *req
	ls.Fun, ls.Arg, ls.Kwarg, ls.Ret, ls.ReturnConfig, ls.ReturnKwargs = "sys.list_functions", nil, nil, "", "", nil
	ls.Funs, ls.FunArgs, ls.FunKwargs = nil, nil, nil
	rets, _, _, err := collect(ctx, socket, &ls)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(rets))
	for id := range rets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var out []string
	for _, id := range ids {
		funs, _ := rets[id]["return"].([]any)
		if hasFunctions(funs, req) {
			out = append(out, id)
		}
		if len(out) >= n {
			break
		}
	}
	return out, nil
}

// hasFunctions reports whether a minion's sys.list_functions has req's
// function, or every function of a compound command (salt's cmd_subset
// looks the list of a compound command up as one item, and finds none).
func hasFunctions(funs []any, req *api.Request) bool {
	if len(req.Funs) == 0 {
		return slices.Contains(funs, any(req.Fun))
	}
	for _, f := range req.Funs {
		if !slices.Contains(funs, any(f)) {
			return false
		}
	}
	return true
}

// pyList is a Python list of strings as print shows it: ['a', 'b'].
func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// retcodeOf is a return's retcode, at least 1 when it failed.
func retcodeOf(data map[string]any) int {
	rc := 0
	switch v := data["retcode"].(type) {
	case int64:
		rc = int(v)
	case uint64:
		rc = int(min(v, math.MaxInt32))
	case int:
		rc = v
	}
	if rc == 0 && !returnOK(data) {
		rc = 1
	}
	return rc
}

// runBatch is salt/cli/batch.py Batch.run for the CLI (the loop itself is
// package batch, which the master's orchestrate shares): ping the target
// first and run only on the minions that answered, keep at most the batch
// size running (rolling: a slot frees batch_wait after each return),
// print the returns as they come (all at the end with --static) and exit
// with the highest retcode (SaltCMD._run_batch in salt/cli/salt.py). With
// --failhard the first bad return (retcode > 0, or no return) stops the
// run, as in Salt; --batch-max-fail N|N% (not Salt's) stops starting
// minions once more than N (N% of them) failed and waits for the running
// ones. Not as Salt: a minion that does not return counts as retcode 1
// (salt counts it 0), unless --hide-timeout.
func runBatch(ctx context.Context, o options, socket string, req *api.Request, oo output.Options, stdout, stderr io.Writer) error {
	ping := *req
	ping.Fun, ping.Arg, ping.Kwarg, ping.Ret, ping.ReturnConfig, ping.ReturnKwargs = "test.ping", nil, nil, "", "", nil
	ping.Funs, ping.FunArgs, ping.FunKwargs = nil, nil, nil
	rets, expected, _, err := collect(ctx, socket, &ping)
	if err != nil {
		return publishError(err, stdout, stderr)
	}
	var minions, down []string
	for _, id := range expected {
		if _, ok := rets[id]; ok {
			minions = append(minions, id)
		} else {
			down = append(down, id)
		}
	}
	sort.Strings(minions)
	sort.Strings(down)
	quiet := o.static || o.out == "quiet"
	if !quiet {
		for _, id := range down {
			fmt.Fprintf(stdout, "Minion %s did not respond. No job will be sent.\n", id)
		}
	}
	start := func(ctx context.Context, ids []string, ret func(string, map[string]any)) error {
		job := *req
		job.Tgt, job.TgtType, job.Delimiter = strings.Join(ids, ","), "list", ""
		c, err := api.Dial(ctx, socket, &job)
		if err != nil {
			return err
		}
		defer c.Close()
		for {
			r, err := c.Next()
			if err != nil {
				return err
			}
			switch r.Kind {
			case api.KindError:
				return &api.RemoteError{Code: r.Code, Msg: r.Error}
			case api.KindReturn:
				if id, ok := r.Data["id"].(string); ok {
					ret(id, r.Data)
				}
			}
			if r.Done {
				return nil
			}
		}
	}
	collected := map[string]any{}
	show := func(id string, ret any, ok bool) error {
		if o.static {
			collected[id] = ret
			return nil
		}
		return output.Format(stdout, o.outputter(ret, ok), map[string]any{id: ret}, oo)
	}
	retcode := 0
	hooks := batch.Hooks{
		Started: func(ids []string) {
			if !quiet {
				fmt.Fprintf(stdout, "\nExecuting run on %s\n\n", pyList(ids))
			}
		},
		Failed: func(data map[string]any) bool { return retcodeOf(data) > 0 },
		Returned: func(r batch.Return) error {
			switch {
			case r.Err != nil:
				fmt.Fprintf(stderr, "ERROR: the job on %s failed: %v\n", pyList([]string{r.ID}), r.Err)
				retcode = max(retcode, 1)
				return nil
			case r.Data == nil:
				if o.hideTimeout {
					return nil
				}
				retcode = max(retcode, 1)
				return show(r.ID, "Minion did not return. [No response]", false)
			}
			retcode = max(retcode, retcodeOf(r.Data))
			return show(r.ID, inSaltOrder(req, r.Data["return"]), returnOK(r.Data))
		},
	}
	bo := batch.Options{Size: o.batch, Wait: time.Duration(o.batchWait * float64(time.Second)), Failhard: o.failhard, MaxFail: o.batchMaxFail}
	res, err := batch.Run(ctx, minions, bo, start, hooks)
	if err != nil {
		return err
	}
	if res.Stopped != "" {
		// Salt logs it as an error.
		fmt.Fprintf(stderr, "[ERROR   ] %s\n", res.Stopped)
		retcode = max(retcode, 1)
	}
	if o.static {
		if err := output.Format(stdout, o.outputter(nil, true), collected, oo); err != nil {
			return err
		}
	}
	if retcode != 0 {
		return &cli.ExitError{Code: retcode}
	}
	return nil
}
