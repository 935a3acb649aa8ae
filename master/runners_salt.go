package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
)

// The runners here follow Salt 3006's salt/runners/manage.py (present,
// alived, versions), jobs.py (list_job, exit_success, last_run), cache.py
// (grains), salt.py (cmd) and doc.py (runner), with Salt's return shapes.

// callTimeout is how long a runner that sends a job waits for its
// returns: its timeout argument, else halite-run's -t, else the master's
// timeout option.
func (m *Master) callTimeout(a *args) (time.Duration, error) {
	if v, ok := a.get(-1, "timeout"); ok && v != nil {
		n, ok := toInt(v)
		if !ok || n < 0 {
			return 0, badRequest("%s: timeout must be a whole number of seconds, got %v", a.req.Fun, v)
		}
		if n > 0 {
			return time.Duration(n) * time.Second, nil
		}
	}
	if a.req.Timeout > 0 {
		return time.Duration(a.req.Timeout * float64(time.Second)), nil
	}
	return time.Duration(m.cfg.Timeout) * time.Second, nil
}

// gather publishes req as a job and waits for the returns of its minions
// as the halite CLI does (jobWatch: timeout, then find_job rounds). It
// returns each returning minion's return data and the minions expected.
func (m *Master) gather(ctx context.Context, req *api.Request, timeout time.Duration) (map[string]map[string]any, []string, error) {
	jid := m.jids.Next()
	sub := m.bus.Subscribe("salt/job/"+jid+"/ret/*", 1<<12)
	defer sub.Close()
	p, err := m.publish(jid, req)
	if err != nil {
		return nil, nil, err
	}
	waiting := make(map[string]bool, len(p.minions))
	for _, id := range p.minions {
		waiting[id] = true
	}
	for _, id := range p.notConnected {
		delete(waiting, id)
	}
	got := make(map[string]map[string]any, len(waiting))
	err = m.awaitReturns(ctx, sub, jid, req.User, timeout, time.Duration(m.cfg.GatherJobTimeout)*time.Second, waiting, func(data map[string]any) error {
		id, _ := data["id"].(string)
		got[id] = data
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return got, p.minions, nil
}

// runManagePresent is manage.present and manage.alived (list_state in
// salt/runners/manage.py): the connected minions, sorted, without sending
// them anything; show_ip=True maps each to the address it connects from
// (a relayed device: its relay's), subset=CIDR keeps those within it.
func (m *Master) runManagePresent(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	subset, err := a.str(0, "subset", false)
	if err != nil {
		return nil, err
	}
	showIP, err := a.boolean(1, "show_ip")
	if err != nil {
		return nil, err
	}
	var within netip.Prefix
	if subset != "" && subset != "<nil>" {
		within, err = netip.ParsePrefix(subset)
		if err != nil {
			return nil, badRequest("%s: subset must be a CIDR range such as 10.0.0.0/8, got %q", req.Fun, subset)
		}
	}
	ids := []string{}
	ips := map[string]any{}
	for _, id := range m.minions.connected() {
		ip := m.sessionIP(id)
		if within.IsValid() && (!ip.IsValid() || !within.Contains(ip)) {
			continue
		}
		ids = append(ids, id)
		if ip.IsValid() {
			ips[id] = ip.String()
		} else {
			ips[id] = ""
		}
	}
	if showIP {
		return ips, nil
	}
	return ids, nil
}

// sessionIP is the address minion id's live session comes from: its own
// connection, or its relay's.
func (m *Master) sessionIP(id string) netip.Addr {
	s := m.minions.session(id)
	if s == nil {
		return netip.Addr{}
	}
	var addr net.Addr
	switch {
	case s.conn != nil:
		addr = s.conn.RemoteAddr()
	case s.relay != nil && s.relay.ctrl != nil && s.relay.ctrl.conn != nil:
		addr = s.relay.ctrl.conn.RemoteAddr()
	}
	if ua, ok := addr.(*net.UDPAddr); ok {
		ip, _ := netip.AddrFromSlice(ua.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// Labels of manage.versions, by how a minion's version compares to the
// master's (salt/runners/manage.py versions).
var versionLabels = map[int]string{
	-2: "Minion offline",
	-1: "Minion requires update",
	0:  "Up to date",
	1:  "Minion newer than master",
}

// runManageVersions is manage.versions: test.version on every minion,
// grouped by how each compares to the master's version; a minion that
// did not return, or failed, is "Minion offline" with False.
func (m *Master) runManageVersions(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	timeout, err := m.callTimeout(a)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"Master": version.Version}
	rets, minions, err := m.gather(ctx, &api.Request{Tgt: "*", Fun: "test.version", User: req.User}, timeout)
	if api.IsCode(err, api.CodeNoMinions) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, id := range minions {
		d, ok := rets[id]
		var v any = false
		diff := -2
		if ok && retcode(d) == 0 {
			if s, isStr := d["return"].(string); isStr && s != "" {
				v, diff = s, compareVersions(s, version.Version)
			}
		}
		label := versionLabels[diff]
		group, _ := out[label].(map[string]any)
		if group == nil {
			group = map[string]any{}
			out[label] = group
		}
		group[id] = v
	}
	return out, nil
}

// compareVersions orders two Halite versions ("v1.2.3", "1.2.3-4-gabc",
// "devel") as Salt's cmp of SaltStackVersion does: -1, 0 or 1. Numbers
// compare numerically part by part; a version without numbers (a devel
// build) is newer than any release, and equal to another such only when
// the texts are equal (else they compare as text).
func compareVersions(a, b string) int {
	pa, oka := versionParts(a)
	pb, okb := versionParts(b)
	switch {
	case !oka && !okb:
		return strings.Compare(a, b)
	case !oka:
		return 1
	case !okb:
		return -1
	}
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// versionParts reads the leading dotted numbers of a version.
func versionParts(v string) ([]int, bool) {
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+ "); i >= 0 {
		v = v[:i]
	}
	var parts []int
	for _, f := range strings.Split(v, ".") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, false
		}
		parts = append(parts, n)
	}
	return parts, len(parts) > 0
}

// listJob is jobs.list_job's return: the job's description, its minions
// and every return, under the job's id.
func (m *Master) listJob(jid string) (map[string]any, error) {
	out := map[string]any{"jid": jid}
	l, err := m.jobs().GetLoad(jid)
	switch {
	case errors.Is(err, jobcache.ErrNotFound):
		out["Error"] = "Cannot contact returner or no job with this jid"
		if t, ok := event.JIDTime(jid, time.Local); ok {
			out["StartTime"] = saltStartTime(t)
		}
	case err != nil:
		return nil, fmt.Errorf("look up %s: %w", jid, err)
	default:
		for k, v := range jobInfo(l) {
			out[k] = v
		}
		minions := l.Minions
		if minions == nil {
			minions = []string{}
		}
		out["Minions"] = minions
	}
	rets, err := m.jobs().GetReturns(jid)
	if err != nil && !errors.Is(err, jobcache.ErrNotFound) {
		return nil, fmt.Errorf("look up %s: %w", jid, err)
	}
	result := make(map[string]any, len(rets))
	for id, r := range rets {
		result[id] = map[string]any{"return": r.Return, "retcode": r.Retcode, "success": r.Success}
	}
	out["Result"] = result
	return out, nil
}

func jidArg(a *args) (string, error) {
	jid, err := a.str(0, "jid", true)
	if err != nil {
		return "", err
	}
	if !event.IsJID(jid) {
		return "", badRequest("%s: %q is not a job id", a.req.Fun, jid)
	}
	return jid, nil
}

func (m *Master) runListJob(_ context.Context, req *api.Request) (any, error) {
	jid, err := jidArg(&args{req: req})
	if err != nil {
		return nil, err
	}
	return m.listJob(jid)
}

// runExitSuccess is jobs.exit_success: for each minion of the job, whether
// it returned something true (Python truthiness of its return).
func (m *Master) runExitSuccess(_ context.Context, req *api.Request) (any, error) {
	jid, err := jidArg(&args{req: req})
	if err != nil {
		return nil, err
	}
	job, err := m.listJob(jid)
	if err != nil {
		return nil, err
	}
	result := job["Result"].(map[string]any)
	out := map[string]any{}
	minions, _ := job["Minions"].([]string)
	for _, id := range minions {
		r, ok := result[id].(map[string]any)
		out[id] = ok && truthy(r["return"])
	}
	for id, r := range result {
		if truthy(r.(map[string]any)["return"]) {
			out[id] = true
		}
	}
	return out, nil
}

// truthy is Python's truth value of a decoded return.
func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case string:
		return v != ""
	case []byte:
		return len(v) > 0
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	case map[any]any:
		return len(v) > 0
	case int:
		return v != 0
	case int64:
		return v != 0
	case uint64:
		return v != 0
	case float64:
		return v != 0
	}
	return true
}

// runLastRun is jobs.last_run: print_job of the newest job matching
// function=GLOB and target=GLOB, or False when none does. Salt's metadata
// filter is refused: Halite's jobs carry no metadata.
func (m *Master) runLastRun(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	if v, ok := a.get(-1, "metadata"); ok && v != nil {
		return nil, badRequest("jobs.last_run: metadata is not supported: jobs carry no metadata")
	}
	fun, _ := a.str(-1, "function", false)
	tgt, _ := a.str(-1, "target", false)
	loads, err := m.jobs().ListJobs(time.Time{}, 0)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	last := ""
	for _, l := range loads {
		if fun != "" && !globOrEqual(fun, l.Fun) || tgt != "" && !globOrEqual(tgt, l.Tgt) {
			continue
		}
		if l.JID > last {
			last = l.JID
		}
	}
	if last == "" {
		return false, nil
	}
	return m.runPrintJob(ctx, &api.Request{Fun: "jobs.print_job", Arg: []any{last}})
}

// runCacheGrains is cache.grains TGT [TGT_TYPE]: the grains the master
// holds for the accepted minions the target matches, by id.
func (m *Master) runCacheGrains(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	tgt, err := a.str(0, "tgt", true)
	if err != nil {
		return nil, err
	}
	tgtType, err := a.str(1, "tgt_type", false)
	if err != nil {
		return nil, err
	}
	ids, err := m.expected(tgt, tgtType, "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(ids))
	for _, id := range ids {
		if g := m.minions.grainsOf(id); g != nil {
			out[id] = g
		}
	}
	return out, nil
}

// LocalCall runs an execution function in this process, as the master's
// user: salt.cmd. The master package imports nothing under agent/, so
// the program that runs the master (cmd/halite-master) gives it one with
// SetLocalCall, from the agent's modules (Salt loads the minion's modules
// on the master for salt.cmd). ok is the function's success.
type LocalCall func(ctx context.Context, jid, fun string, args []any, kwargs map[string]any, user string) (ret any, ok bool)

// SetLocalCall sets what salt.cmd runs functions with; call it before Run.
// Without one, salt.cmd fails saying so.
func (m *Master) SetLocalCall(f LocalCall) { m.localCall = f }

// Name is the master's id (its id option, else the host name + "_master").
func (m *Master) Name() string { return m.name }

// runSaltCmd is salt.cmd FUN [ARG ...] [KEY=VALUE ...]: an execution
// function run on the master itself, as the master's user (LocalCall). A
// failure is the call's error.
func (m *Master) runSaltCmd(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	fun, err := a.str(0, "fun", true)
	if err != nil {
		return nil, err
	}
	if m.localCall == nil {
		return nil, &api.RemoteError{Code: api.CodeFailed, Msg: "salt.cmd: this master runs no execution functions itself"}
	}
	var rest []any
	if len(req.Arg) > 0 {
		rest = req.Arg[1:]
	}
	kw := make(map[string]any, len(req.Kwarg))
	for k, v := range req.Kwarg {
		if k != "fun" && k != "with_pillar" {
			kw[k] = v
		}
	}
	ret, ok := m.localCall(ctx, m.jids.Next(), fun, rest, kw, req.User)
	if !ok {
		return nil, &api.RemoteError{Code: api.CodeFailed, Msg: fmt.Sprintf("salt.cmd %s: %v", fun, ret)}
	}
	return ret, nil
}

// runDocRunner is doc.runner: every runner's documentation, by name.
func (m *Master) runDocRunner(context.Context, *api.Request) (any, error) {
	out := map[string]any{}
	for _, name := range m.RunnerNames() {
		out[name] = runnerDocs[name]
	}
	return out, nil
}
