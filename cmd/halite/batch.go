package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/master/api"
)

// parseBatch checks -b/--batch-size: a whole number or a percentage, N or
// N% (salt/cli/batch.py get_bnum: "Data must be in the form of %10, 10% or
// 3").
func parseBatch(s string) error {
	num := strings.TrimSuffix(s, "%")
	if num != s {
		num = strings.TrimPrefix(num, "%")
	} else if strings.HasPrefix(s, "%") {
		num = s[1:]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0) || math.IsInf(f, 0) || (!strings.Contains(s, "%") && f != math.Trunc(f)) {
		return cli.Usagef("invalid batch size %q: give it in the form of %%10, 10%% or 3", s)
	}
	return nil
}

// batchSize is salt/cli/batch.py get_bnum: N, or N% of the minions (floored,
// but rounded up to 1 below 1); never more than the minions (a larger N
// runs them all at once, as in Salt).
func batchSize(s string, minions int) int {
	f, _ := strconv.ParseFloat(strings.Trim(s, "%"), 64)
	if strings.Contains(s, "%") {
		f = f / 100 * float64(minions)
		if f < 1 {
			f = math.Ceil(f)
		}
	}
	return int(max(min(f, float64(minions)), 1))
}

// scheduler is the rolling window of salt/cli/batch.py Batch.run: at most
// bnum minions are active or cooling down; a minion that returned (or timed
// out) frees its slot batch_wait later.
type scheduler struct {
	bnum  int
	bwait time.Duration
	toRun []string
	// active counts the minions running the job; wait holds when each
	// cooling slot frees, in order.
	active int
	wait   []time.Time
}

// next returns the minions to start now.
func (s *scheduler) next(now time.Time) []string {
	i := 0
	for i < len(s.wait) && !s.wait[i].After(now) {
		i++
	}
	s.wait = s.wait[i:]
	free := min(s.bnum-s.active-len(s.wait), len(s.toRun))
	if free <= 0 {
		return nil
	}
	n := s.toRun[:free:free]
	s.toRun = s.toRun[free:]
	s.active += free
	return n
}

// finished frees a minion's slot, batch_wait after now.
func (s *scheduler) finished(now time.Time) {
	s.active--
	if s.bwait > 0 {
		s.wait = append(s.wait, now.Add(s.bwait))
	}
}

// wake is when the next cooling slot frees, if one does.
func (s *scheduler) wake() (time.Time, bool) {
	if len(s.wait) == 0 || len(s.toRun) == 0 {
		return time.Time{}, false
	}
	return s.wait[0], true
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

type batchEvent struct {
	job  []string
	resp *api.Response
	err  error
}

// runBatch is salt/cli/batch.py Batch.run for the CLI: ping the target
// first and run only on the minions that answered, keep at most the batch
// size running (rolling: a slot frees batch_wait after each return),
// print the returns as they come (all at the end with --static) and exit
// with the highest retcode (SaltCMD._run_batch in salt/cli/salt.py). Not
// as Salt: a minion that does not return counts as retcode 1 (salt counts
// it 0), unless --hide-timeout.
func runBatch(ctx context.Context, o options, socket string, req *api.Request, oo output.Options, stdout, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

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
	s := &scheduler{bnum: batchSize(o.batch, len(minions)), bwait: time.Duration(o.batchWait * float64(time.Second)), toRun: minions}
	events := make(chan batchEvent)
	start := func(ids []string) {
		job := *req
		job.Tgt, job.TgtType, job.Delimiter = strings.Join(ids, ","), "list", ""
		wg.Add(1)
		go func() {
			defer wg.Done()
			send := func(ev batchEvent) bool {
				select {
				case events <- ev:
					return true
				case <-ctx.Done():
					return false
				}
			}
			c, err := api.Dial(ctx, socket, &job)
			if err != nil {
				send(batchEvent{job: ids, err: err})
				return
			}
			defer c.Close()
			for {
				r, err := c.Next()
				if err != nil {
					send(batchEvent{job: ids, err: err})
					return
				}
				if !send(batchEvent{job: ids, resp: r}) || r.Done {
					return
				}
			}
		}()
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
	pending := map[string]bool{}
	for _, id := range minions {
		pending[id] = true
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for len(pending) > 0 {
		now := time.Now()
		if next := s.next(now); len(next) > 0 {
			if !quiet {
				fmt.Fprintf(stdout, "\nExecuting run on %s\n\n", pyList(next))
			}
			start(next)
		}
		var wake <-chan time.Time
		if t, ok := s.wake(); ok {
			timer.Reset(t.Sub(now))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
			continue
		case ev := <-events:
			finish := func(id string) bool {
				if !pending[id] {
					return false
				}
				delete(pending, id)
				s.finished(time.Now())
				return true
			}
			if ev.err != nil || ev.resp.Kind == api.KindError {
				msg := ""
				if ev.err != nil {
					msg = ev.err.Error()
				} else {
					msg = ev.resp.Error
				}
				fmt.Fprintf(stderr, "ERROR: the job on %s failed: %s\n", pyList(ev.job), msg)
				for _, id := range ev.job {
					if finish(id) {
						retcode = max(retcode, 1)
					}
				}
				continue
			}
			r := ev.resp
			if r.Kind == api.KindReturn {
				id, _ := r.Data["id"].(string)
				if !finish(id) {
					continue
				}
				retcode = max(retcode, retcodeOf(r.Data))
				if err := show(id, inSaltOrder(req, r.Data["return"]), returnOK(r.Data)); err != nil {
					return err
				}
			}
			if r.Done {
				for _, id := range ev.job {
					if !finish(id) || o.hideTimeout {
						continue
					}
					retcode = max(retcode, 1)
					if err := show(id, "Minion did not return. [No response]", false); err != nil {
						return err
					}
				}
			}
		}
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
