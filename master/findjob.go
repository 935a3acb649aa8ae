package master

import (
	"context"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
)

// jobWatch decides how long a client waits for the minions of a job that
// have not returned, as Salt's LocalClient.get_iter_returns does
// (salt/client/__init__.py): the timeout is not a deadline. Once it has
// passed, the minions still awaited are asked with saltutil.find_job
// whether they still run the job, and asked again every
// gather_job_timeout while any of them says so; a minion is awaited until
// timeout after the last time it said so. When a round brings no such
// answer and those times have passed, the rest are given up.
type jobWatch struct {
	m       *Master
	jid     string
	user    string
	timeout time.Duration
	gather  time.Duration
	waiting map[string]bool      // the minions awaited; owned by the caller
	until   map[string]time.Time // minion -> when it stops being awaited
	running bool                 // a minion said it runs the job since the last round began

	sub   *event.Subscription // returns of the current find_job, or nil
	asked map[string]bool     // minions asked in this round that have not answered
}

// newJobWatch starts watching job jid, published now to the minions of
// waiting.
func (m *Master) newJobWatch(jid, user string, timeout, gather time.Duration, waiting map[string]bool) *jobWatch {
	w := &jobWatch{
		m: m, jid: jid, user: user, timeout: timeout, gather: gather, waiting: waiting,
		until: make(map[string]time.Time, len(waiting)), running: true,
	}
	end := time.Now().Add(timeout)
	for id := range waiting {
		w.until[id] = end
	}
	return w
}

// C delivers the returns of the current find_job round (nil: none).
func (w *jobWatch) C() <-chan event.Event {
	if w.sub == nil {
		return nil
	}
	return w.sub.C()
}

func (w *jobWatch) close() {
	if w.sub != nil {
		w.sub.Close()
		w.sub = nil
	}
}

// expired is called when the wait it last asked for has passed. It returns
// how long to wait now, or false: give up on the minions still awaited.
func (w *jobWatch) expired(now time.Time) (time.Duration, bool) {
	if w.running {
		w.running = false
		if w.ask() {
			return w.gather, true
		}
	}
	w.close()
	var last time.Time
	for id := range w.waiting {
		if t := w.until[id]; t.After(last) {
			last = t
		}
	}
	if last.After(now) {
		return last.Sub(now), true
	}
	return 0, false
}

// ask publishes saltutil.find_job to the minions awaited; it reports
// whether any connected minion was asked.
func (w *jobWatch) ask() bool {
	w.close()
	ids := make([]string, 0, len(w.waiting))
	for id := range w.waiting {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fjid := w.m.jids.Next()
	w.sub = w.m.bus.Subscribe("salt/job/"+fjid+"/ret/*", len(ids)+16)
	p, err := w.m.publish(fjid, &api.Request{
		Tgt: strings.Join(ids, ","), TgtType: "list", Fun: "saltutil.find_job", Arg: []any{w.jid}, User: w.user,
	})
	if err != nil {
		w.m.log.Debug("find_job", zap.String("jid", w.jid), zap.Error(err))
		return false
	}
	w.asked = make(map[string]bool, len(p.minions))
	for _, id := range p.minions {
		w.asked[id] = true
	}
	for _, id := range p.notConnected {
		delete(w.asked, id)
	}
	return len(w.asked) > 0
}

// answer takes one return of find_job. It reports whether every minion
// asked has answered and none runs the job: the wait may end at once.
func (w *jobWatch) answer(ev event.Event) bool {
	id, _ := ev.Data["id"].(string)
	if !w.asked[id] {
		return false
	}
	delete(w.asked, id)
	if !w.waiting[id] {
		return false // it returned meanwhile
	}
	switch {
	case retcode(ev.Data) > 0:
		// Salt stops waiting for a minion whose find_job failed.
		w.until[id] = time.Time{}
	case nonEmptyMap(ev.Data["return"]):
		w.until[id] = time.Now().Add(w.timeout)
		w.running = true
	}
	return len(w.asked) == 0 && !w.running
}

// retcode is the retcode of a return's data (ReturnBody.Map).
func retcode(d map[string]any) int {
	rc, _ := d["retcode"].(int)
	return rc
}

func nonEmptyMap(v any) bool {
	switch m := v.(type) {
	case map[string]any:
		return len(m) > 0
	case map[any]any:
		return len(m) > 0
	}
	return false
}

// awaitReturns waits for the returns of a job's waiting minions, as Salt's
// get_iter_returns does: until each has returned, or timeout has passed
// and no minion still runs the job (jobWatch's find_job rounds every
// gather). sub is the job's salt/job/<jid>/ret/* subscription; ret is
// called with each waiting minion's return, whose id leaves waiting. What
// is left in waiting when it returns nil did not return. It returns ret's
// error or the context's.
func (m *Master) awaitReturns(ctx context.Context, sub *event.Subscription, jid, user string, timeout, gather time.Duration, waiting map[string]bool, ret func(data map[string]any) error) error {
	watch := m.newJobWatch(jid, user, timeout, gather, waiting)
	defer watch.close()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(waiting) > 0 {
		select {
		case ev := <-watch.C():
			if watch.answer(ev) {
				timer.Reset(0)
			}
		case ev := <-sub.C():
			id, _ := ev.Data["id"].(string)
			if !waiting[id] {
				continue
			}
			delete(waiting, id)
			if err := ret(ev.Data); err != nil {
				return err
			}
		case <-timer.C:
			d, wait := watch.expired(time.Now())
			if !wait {
				return nil
			}
			timer.Reset(d)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
