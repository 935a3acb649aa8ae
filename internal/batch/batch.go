package batch

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Check checks a batch size: a whole number or a percentage, N or N%
// (salt/cli/batch.py get_bnum: "Data must be in the form of %10, 10% or
// 3").
func Check(s string) error {
	if _, ok := parse(s, false); !ok {
		return fmt.Errorf("invalid batch size %q: give it in the form of %%10, 10%% or 3", s)
	}
	return nil
}

// CheckLimit checks a max_fail limit: as a batch size, but 0 (or 0%) is
// allowed: no failure at all.
func CheckLimit(s string) error {
	if _, ok := parse(s, true); !ok {
		return fmt.Errorf("invalid failure limit %q: give a number of minions or a percentage of them, e.g. 3 or 10%%", s)
	}
	return nil
}

// parse reads N, N% or %N; ok is false for anything else, and for 0 unless
// zero.
func parse(s string, zero bool) (float64, bool) {
	num := strings.TrimSuffix(s, "%")
	if num != s {
		num = strings.TrimPrefix(num, "%")
	} else if strings.HasPrefix(s, "%") {
		num = s[1:]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 || (f == 0 && !zero) ||
		(!strings.Contains(s, "%") && f != math.Trunc(f)) {
		return 0, false
	}
	return f, true
}

// Size is salt/cli/batch.py get_bnum: N, or N% of the minions (floored,
// but rounded up to 1 below 1); never more than the minions (a larger N
// runs them all at once, as in Salt). s must have passed Check.
func Size(s string, minions int) int {
	f, _ := parse(s, false)
	if strings.Contains(s, "%") {
		f = f / 100 * float64(minions)
		if f < 1 {
			f = math.Ceil(f)
		}
	}
	return int(max(min(f, float64(minions)), 1))
}

// Limit is the number of failures a max_fail limit s allows out of
// minions: N, or N% of them floored. s must have passed CheckLimit.
func Limit(s string, minions int) int {
	f, _ := parse(s, true)
	if strings.Contains(s, "%") {
		f = math.Floor(f / 100 * float64(minions))
	}
	return int(min(f, float64(minions)))
}

// Scheduler is the rolling window of salt/cli/batch.py Batch.run: at most
// Size minions are active or cooling down; a minion that returned (or
// timed out) frees its slot Wait later.
type Scheduler struct {
	Size  int
	Wait  time.Duration
	ToRun []string
	// active counts the minions running the job; wait holds when each
	// cooling slot frees, in order.
	active int
	wait   []time.Time
}

// Next returns the minions to start now.
func (s *Scheduler) Next(now time.Time) []string {
	i := 0
	for i < len(s.wait) && !s.wait[i].After(now) {
		i++
	}
	s.wait = s.wait[i:]
	free := min(s.Size-s.active-len(s.wait), len(s.ToRun))
	if free <= 0 {
		return nil
	}
	n := s.ToRun[:free:free]
	s.ToRun = s.ToRun[free:]
	s.active += free
	return n
}

// Finished frees a minion's slot, Wait after now.
func (s *Scheduler) Finished(now time.Time) {
	s.active--
	if s.Wait > 0 {
		s.wait = append(s.wait, now.Add(s.Wait))
	}
}

// Wake is when the next cooling slot frees, if one does and a minion waits
// for it.
func (s *Scheduler) Wake() (time.Time, bool) {
	if len(s.wait) == 0 || len(s.ToRun) == 0 {
		return time.Time{}, false
	}
	return s.wait[0], true
}

// Options are a batch run's settings.
type Options struct {
	Size string        // N or N%: checked with Check
	Wait time.Duration // batch_wait
	// Failhard stops the run at the first bad return, as Salt's failhard
	// does in a batch: no more minions start, and the run returns without
	// waiting for those still running.
	Failhard bool
	// MaxFail ("" for none; N or N%, checked with CheckLimit) stops
	// starting minions once more than that many (N% of all the minions)
	// have failed; the run still waits for the minions already started.
	MaxFail string
}

// Return is one minion's outcome.
type Return struct {
	ID string
	// Data is the minion's return (Salt's return dict); nil when it did
	// not return before its job ended, or when Err is set.
	Data map[string]any
	// Err is the error of the job that was to run on the minion.
	Err error
}

// StartFunc runs the job on ids, calls ret for each return as it comes,
// and returns when the job is over (its timeout passed or every minion
// returned). Run reports the ids that did not return as missing.
type StartFunc func(ctx context.Context, ids []string, ret func(id string, data map[string]any)) error

// Hooks are Run's callbacks, called from Run's goroutine.
type Hooks struct {
	// Started is called before each batch starts.
	Started func(ids []string)
	// Returned is called once for each minion; an error ends the run.
	Returned func(r Return) error
	// Failed says whether a return is bad, for Failhard and MaxFail; a
	// missing return and a job error are always bad.
	Failed func(data map[string]any) bool
}

// Outcome is how a run ended.
type Outcome struct {
	// Stopped says why minions were left out: "" when every minion ran.
	Stopped string
	// NotRun are the minions that were never started.
	NotRun []string
	// Failed counts the bad returns.
	Failed int
}

type event struct {
	id   string
	ids  []string // the job's ids, when done
	data map[string]any
	err  error
	done bool
}

// Run runs the minions ids in rolling batches: start for each batch, in
// its own goroutine; h.Returned for each minion as its return comes (or
// as its job ends without one). It returns after every goroutine it
// started has returned.
func Run(ctx context.Context, ids []string, o Options, start StartFunc, h Hooks) (Outcome, error) {
	if err := Check(o.Size); err != nil {
		return Outcome{}, err
	}
	maxFail := -1
	if o.MaxFail != "" {
		if err := CheckLimit(o.MaxFail); err != nil {
			return Outcome{}, err
		}
		maxFail = Limit(o.MaxFail, len(ids))
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	s := &Scheduler{Size: Size(o.Size, len(ids)), Wait: o.Wait, ToRun: append([]string(nil), ids...)}
	events := make(chan event)
	send := func(ev event) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	launch := func(batch []string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := start(ctx, batch, func(id string, data map[string]any) { send(event{id: id, data: data}) })
			send(event{ids: batch, err: err, done: true})
		}()
	}
	pending := make(map[string]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	var out Outcome
	bad := func(r Return) bool {
		return r.Err != nil || r.Data == nil || (h.Failed != nil && h.Failed(r.Data))
	}
	// finish reports one minion; stop is set when the run must end now.
	finish := func(r Return) (stop bool, err error) {
		if !pending[r.ID] {
			return false, nil
		}
		delete(pending, r.ID)
		s.Finished(time.Now())
		if h.Returned != nil {
			if err := h.Returned(r); err != nil {
				return true, err
			}
		}
		if !bad(r) {
			return false, nil
		}
		out.Failed++
		if o.Failhard {
			out.Stopped = fmt.Sprintf("Minion %s returned with non-zero exit code. Batch run stopped due to failhard", r.ID)
			return true, nil
		}
		if maxFail >= 0 && out.Failed > maxFail && out.Stopped == "" {
			out.Stopped = fmt.Sprintf("%d of %d minions failed, more than max_fail %s allows. Batch run stopped", out.Failed, len(ids), o.MaxFail)
		}
		return false, nil
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	running := 0
	for len(pending) > 0 {
		now := time.Now()
		if out.Stopped == "" {
			if next := s.Next(now); len(next) > 0 {
				if h.Started != nil {
					h.Started(next)
				}
				running++
				launch(next)
			}
		} else if running == 0 {
			break
		}
		var wake <-chan time.Time
		if t, ok := s.Wake(); ok && out.Stopped == "" {
			timer.Reset(t.Sub(now))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-wake:
			continue
		case ev := <-events:
			var stop bool
			var err error
			switch {
			case !ev.done:
				stop, err = finish(Return{ID: ev.id, Data: ev.data})
			default:
				running--
				for _, id := range ev.ids {
					if stop || err != nil {
						break
					}
					stop, err = finish(Return{ID: id, Err: ev.err})
				}
			}
			if err != nil {
				return out, err
			}
			if stop {
				out.NotRun = notRun(ids, pending, s.ToRun)
				return out, nil
			}
		}
	}
	out.NotRun = append([]string(nil), s.ToRun...)
	return out, nil
}

// notRun lists, in ids' order, the minions still to run.
func notRun(ids []string, pending map[string]bool, toRun []string) []string {
	left := make(map[string]bool, len(toRun))
	for _, id := range toRun {
		left[id] = true
	}
	var out []string
	for _, id := range ids {
		if pending[id] && left[id] {
			out = append(out, id)
		}
	}
	return out
}
