package master

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// runners are the master's runner functions, by name, from the part that
// offers each: the jobs, manage, event, cache, salt and doc runners
// (runners.go, runners_salt.go, runners_doc.go), the mine's, the
// reactor's and the returners'.
func (m *Master) runners() map[string]callFunc {
	// The table is the same for the master's life (its functions are
	// bound to m): built once, read by every runner call.
	m.runnersOnce.Do(func() { m.runnerTable = m.buildRunners() })
	return m.runnerTable
}

// buildRunners gathers the runner functions of every part of the master.
func (m *Master) buildRunners() map[string]callFunc {
	r := map[string]callFunc{}
	for _, t := range []map[string]callFunc{
		coreRunners(m),
		mineRunners(m),        // mine.go
		pillarRunners(m),      // pillar.go
		reactorRunners(m),     // reactor.go
		returnerRunners(m),    // returners.go
		orchestrateRunners(m), // orchestrate.go
		discoveryRunners(m),   // discovery.go
		firmwareRunners(m),    // firmware.go
		proxyRunners(m),       // proxyctl.go
	} {
		maps.Copy(r, t)
	}
	return r
}

func coreRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{
		"jobs.list_jobs":    m.runListJobs,
		"jobs.lookup_jid":   m.runLookupJID,
		"jobs.print_job":    m.runPrintJob,
		"jobs.active":       m.runActive,
		"manage.up":         m.runManageUp,
		"manage.down":       m.runManageDown,
		"manage.status":     m.runManageStatus,
		"event.send":        m.runEventSend,
		"manage.present":    m.runManagePresent,
		"manage.alived":     m.runManagePresent,
		"manage.versions":   m.runManageVersions,
		"jobs.list_job":     m.runListJob,
		"jobs.exit_success": m.runExitSuccess,
		"jobs.last_run":     m.runLastRun,
		"cache.grains":      m.runCacheGrains,
		"salt.cmd":          m.runSaltCmd,
		"doc.runner":        m.runDocRunner,
	}
}

// RunnerNames lists the runner functions the master offers.
func (m *Master) RunnerNames() []string {
	var out []string
	for k := range m.runners() {
		out = append(out, k)
	}
	out = append(out, "state.event")
	sort.Strings(out)
	return out
}

func (m *Master) runRunner(ctx context.Context, req *api.Request) (any, error) {
	fn, ok := m.runners()[req.Fun]
	if !ok {
		return nil, badRequest("'%s' is not available.", req.Fun)
	}
	return fn(ctx, req)
}

// args gives positional-or-keyword access to a request's arguments, as a
// Python function signature would.
type args struct {
	req  *api.Request
	used int
}

func (a *args) get(pos int, name string) (any, bool) {
	if v, ok := a.req.Kwarg[name]; ok {
		return v, true
	}
	if pos >= 0 && pos < len(a.req.Arg) {
		return a.req.Arg[pos], true
	}
	return nil, false
}

func (a *args) str(pos int, name string, required bool) (string, error) {
	v, ok := a.get(pos, name)
	if !ok {
		if required {
			return "", badRequest("%s: missing required argument %q", a.req.Fun, name)
		}
		return "", nil
	}
	return fmt.Sprint(v), nil
}

func (a *args) boolean(pos int, name string) (bool, error) {
	v, ok := a.get(pos, name)
	if !ok {
		return false, nil
	}
	if b, ok := config.Bool(v); ok {
		return b, nil
	}
	return false, badRequest("%s: %s must be True or False, got %v", a.req.Fun, name, v)
}

func toInt(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int64:
		return int(v), true
	case uint64:
		return int(v), true
	case float64:
		return int(v), v == float64(int(v))
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// saltStartTime formats a job's start time as Salt's jobs runners do.
func saltStartTime(t time.Time) string {
	return t.Format("2006, Jan 02 15:04:05.000000")
}

func jobInfo(l *jobcache.Load) map[string]any {
	arg := l.Arg
	if arg == nil {
		arg = []any{}
	}
	return map[string]any{
		"Function": l.Fun, "Arguments": arg, "Target": l.Tgt, "Target-type": l.TgtType,
		"User": l.User, "StartTime": saltStartTime(l.StartTime),
	}
}

func (m *Master) runListJobs(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	searchFun, _ := a.str(-1, "search_function", false)
	searchTgt, _ := a.str(-1, "search_target", false)
	loads, err := m.jobs().ListJobs(time.Time{}, 0)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	out := make(map[string]any, len(loads))
	for _, l := range loads {
		if searchFun != "" && !globOrEqual(searchFun, l.Fun) {
			continue
		}
		if searchTgt != "" && !globOrEqual(searchTgt, l.Tgt) {
			continue
		}
		out[l.JID] = jobInfo(l)
	}
	return out, nil
}

func (m *Master) runLookupJID(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	jid, err := a.str(0, "jid", true)
	if err != nil {
		return nil, err
	}
	if !event.IsJID(jid) {
		return nil, badRequest("jobs.lookup_jid: %q is not a job id", jid)
	}
	rets, err := m.jobs().GetReturns(jid)
	if err != nil && !errors.Is(err, jobcache.ErrNotFound) {
		return nil, fmt.Errorf("look up %s: %w", jid, err)
	}
	out := make(map[string]any, len(rets))
	for id, r := range rets {
		out[id] = r.Return
	}
	return out, nil
}

func (m *Master) runPrintJob(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	jid, err := a.str(0, "jid", true)
	if err != nil {
		return nil, err
	}
	l, err := m.jobs().GetLoad(jid)
	if errors.Is(err, jobcache.ErrNotFound) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", jid, err)
	}
	rets, err := m.jobs().GetReturns(jid)
	if err != nil && !errors.Is(err, jobcache.ErrNotFound) {
		return nil, fmt.Errorf("look up %s: %w", jid, err)
	}
	info := jobInfo(l)
	minions := l.Minions
	if minions == nil {
		minions = []string{}
	}
	info["Minions"] = minions
	result := make(map[string]any, len(rets))
	for id, r := range rets {
		result[id] = map[string]any{"return": r.Return, "retcode": r.Retcode, "success": r.Success}
	}
	info["Result"] = result
	return map[string]any{jid: info}, nil
}

// runActive asks every connected minion what it is running
// (saltutil.running), as Salt's jobs.active does.
func (m *Master) runActive(ctx context.Context, req *api.Request) (any, error) {
	connected := m.minions.connected()
	out := map[string]any{}
	if len(connected) == 0 {
		return out, nil
	}
	timeout, err := m.callTimeout(&args{req: req})
	if err != nil {
		return nil, err
	}
	jid := m.jids.Next()
	sub := m.bus.Subscribe("salt/job/"+jid+"/ret/*", len(connected)+16)
	defer sub.Close()
	p, err := m.publish(jid, &api.Request{Tgt: strings.Join(connected, ","), TgtType: "list", Fun: "saltutil.running", User: req.User})
	if err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	waiting := len(p.minions) - len(p.notConnected)
	for waiting > 0 {
		select {
		case ev := <-sub.C():
			waiting--
			id, _ := ev.Data["id"].(string)
			running, _ := ev.Data["return"].([]any)
			for _, r := range running {
				job, ok := r.(map[string]any)
				if !ok {
					continue
				}
				rjid, _ := job["jid"].(string)
				if rjid == "" || rjid == jid {
					continue
				}
				entry, ok := out[rjid].(map[string]any)
				if !ok {
					entry = map[string]any{"Running": []any{}, "Returned": []any{}}
					if l, err := m.jobs().GetLoad(rjid); err == nil {
						for k, v := range jobInfo(l) {
							entry[k] = v
						}
					}
					out[rjid] = entry
				}
				entry["Running"] = append(entry["Running"].([]any), map[string]any{id: job["pid"]})
			}
		case <-timer.C:
			waiting = 0
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	for rjid, e := range out {
		rets, err := m.jobs().GetReturns(rjid)
		if err != nil {
			continue
		}
		entry := e.(map[string]any)
		returned := []any{}
		for id := range rets {
			returned = append(returned, id)
		}
		entry["Returned"] = returned
	}
	return out, nil
}

func (m *Master) upDown() (up, down []string, err error) {
	all, err := m.keys.List()
	if err != nil {
		return nil, nil, fmt.Errorf("list keys: %w", err)
	}
	up, down = []string{}, []string{}
	for _, id := range all["minions"] {
		if m.minions.session(id) != nil {
			up = append(up, id)
		} else {
			down = append(down, id)
		}
	}
	return up, down, nil
}

func (m *Master) runManageUp(context.Context, *api.Request) (any, error) {
	up, _, err := m.upDown()
	return up, err
}

func (m *Master) runManageDown(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	remove, err := a.boolean(0, "removekeys")
	if err != nil {
		return nil, err
	}
	_, down, err := m.upDown()
	if err != nil {
		return nil, err
	}
	if remove {
		for _, id := range down {
			if err := m.deleteKey(id); err != nil {
				return nil, err
			}
		}
	}
	return down, nil
}

func (m *Master) runManageStatus(context.Context, *api.Request) (any, error) {
	up, down, err := m.upDown()
	if err != nil {
		return nil, err
	}
	return map[string]any{"up": up, "down": down}, nil
}

// runEventSend fires an event on the master's bus: event.send TAG [DATA].
func (m *Master) runEventSend(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	tag, err := a.str(0, "tag", true)
	if err != nil {
		return nil, err
	}
	if tag == "" {
		return nil, badRequest("event.send: the tag is empty")
	}
	data := map[string]any{}
	if v, ok := a.get(1, "data"); ok && v != nil {
		d, ok := v.(map[string]any)
		if !ok {
			return nil, badRequest("event.send: data must be a dictionary, got %T", v)
		}
		for k, v := range d {
			data[k] = v
		}
	} else {
		// Salt's event.send takes extra keyword arguments as data.
		for k, v := range req.Kwarg {
			if k != "tag" && !strings.HasPrefix(k, "__") {
				data[k] = v
			}
		}
	}
	m.bus.Publish(tag, data)
	return true, nil
}
