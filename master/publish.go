package master

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// maxJobBody is the largest encoded job publish sends: agents read frames
// of protocol.DefaultMaxFrame, and a relay's envelope needs some room
// (the agent keeps its returns under the same bound).
const maxJobBody = protocol.DefaultMaxFrame - 4096

// published is what publish tells its caller.
type published struct {
	jid          string
	minions      []string // expected to return
	notConnected []string // expected but not connected now
}

// expected returns the accepted minions that tgt matches, from the grains
// the master holds.
func (m *Master) expected(tgt, tgtType, delim string) ([]string, error) {
	matcher, err := targets.Compile(tgt, tgtType, targets.Options{Delimiter: delim, Nodegroups: m.cfg.Nodegroups})
	if err != nil {
		return nil, &api.RemoteError{Code: api.CodeBadRequest, Msg: err.Error()}
	}
	all, err := m.keys.List()
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	if matcher.NeedsPillar() {
		return m.matchPillar(context.Background(), matcher, all["minions"])
	}
	return m.minions.match(matcher, all["minions"]), nil
}

// publish signs a job once, stores its load, fires salt/job/<jid>/new and
// sends the job to every connected minion the target matches. jid must come
// from m.jids; the caller subscribes to the job's returns before calling.
func (m *Master) publish(jid string, req *api.Request) (*published, error) {
	p, saved, err := m.publishQueued(jid, req)
	if saved != nil {
		m.loadSaved(jid, saved)
	}
	return p, err
}

// loadSaved waits until the load of jid that publishQueued queued is
// durable, and logs it if it could not be stored.
func (m *Master) loadSaved(jid string, saved func() error) {
	if err := saved(); err != nil {
		// The job still runs; its returns are kept when they come.
		m.log.Error("save job load", zap.String("jid", jid), zap.Error(err))
	}
}

// publishQueued is publish that returns before the job's load is durable:
// the load is queued for the job cache's next group commit before the job
// is sent (its returns are committed with it or after it), and saved,
// when not nil, waits for that commit; the caller must call it, through
// loadSaved, once. The reactor's workers hand it to a goroutine of its
// own, so that a worker goes on to the next reaction while the commit is
// under way instead of waiting a commit per job.
func (m *Master) publishQueued(jid string, req *api.Request) (_ *published, saved func() error, _ error) {
	if err := checkReturn(req.Ret); err != nil {
		return nil, nil, err
	}
	if err := checkCompound(req); err != nil { // servePublish's callers and the others'
		return nil, nil, err
	}
	minions, err := m.expected(req.Tgt, req.TgtType, req.Delimiter)
	if err != nil {
		return nil, nil, err
	}
	if len(minions) == 0 {
		return nil, nil, &api.RemoteError{Code: api.CodeNoMinions, Msg: "No minions matched the target. No command was sent, no jid was assigned."}
	}
	user := req.User
	if user == "" {
		user = "root"
	}
	jobKwarg, err := m.syncKwargs(req) // engines.go: sync jobs carry the files
	if err != nil {
		return nil, nil, err
	}
	jb := &protocol.JobBody{
		JID: jid, Tgt: req.Tgt, TgtType: tgtTypeOr(req.TgtType), Fun: req.Fun,
		Arg: req.Arg, Kwarg: jobKwarg, User: user, Ret: req.Ret, Master: m.name,
		Delimiter: req.Delimiter, Issued: time.Now().Unix(),
		Funs: req.Funs, FunArgs: req.FunArgs, FunKwargs: req.FunKwargs,
	}
	states, err := m.compileStates(req, jb, minions) // states.go: nil unless a state function
	if err == nil && states == nil {
		states, err = m.firmwareJobs(req, jb, minions) // firmware.go: one job per platform
	}
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	load := &jobcache.Load{
		JID: jid, Tgt: req.Tgt, TgtType: jb.TgtType, Fun: req.Fun, Arg: req.Arg, Kwarg: req.Kwarg,
		Minions: minions, User: user, Ret: req.Ret, StartTime: now,
		RetConfig: req.ReturnConfig, RetKwargs: req.ReturnKwargs,
	}
	var funs any = req.Fun
	if len(req.Funs) > 0 {
		// Salt's load of a compound job: "fun" a list, "arg" a list of
		// each function's arguments (LocalClient.cmd in
		// salt/client/__init__.py).
		load.Arg, funs = compoundArgs(req), toAnyList(req.Funs)
	}
	// A job the cache could not read back, or a device could not receive,
	// is refused before anything is stored or sent.
	encLoad, err := jobcache.EncodeLoad(load)
	if err != nil {
		return nil, nil, &api.RemoteError{Code: api.CodeBadRequest, Msg: "job refused: " + err.Error()}
	}
	job, err := protocol.SignJob(m.id.Priv, jb)
	if err != nil {
		return nil, nil, fmt.Errorf("sign job: %w", err)
	}
	body, err := protocol.Encode(job)
	if err != nil {
		return nil, nil, fmt.Errorf("encode job: %w", err)
	}
	if len(body) > maxJobBody {
		return nil, nil, &api.RemoteError{Code: api.CodeBadRequest,
			Msg: fmt.Sprintf("job refused: %d bytes encoded, more than the %d a device reads", len(body), maxJobBody)}
	}
	wire := protocol.AppendFrame(nil, body)
	// The load joins the job cache's next group commit now; publish
	// returns once it is durable, but the job is sent meanwhile. Its
	// returns are committed with it or after it. If it cannot be stored,
	// the job still runs and its returns are kept when they come.
	saved = m.cache.QueueLoadEncoded(jid, encLoad)
	if m.returners != nil {
		m.returners.JobPublished(load)
	}
	m.metrics.jobPublished(jid, now)
	arg := saltArgs(req.Arg, req.Kwarg)
	if len(req.Funs) > 0 {
		arg = load.Arg
	}
	m.bus.Publish(event.TagJobNew(jid), map[string]any{
		"jid": jid, "tgt": req.Tgt, "tgt_type": jb.TgtType, "fun": funs, "arg": arg,
		"minions": minions, "missing": []string{}, "user": user, "_stamp": event.Stamp(now),
	})
	p := &published{jid: jid, minions: minions}
	if states != nil { // one job per compiled variant
		p.notConnected = m.sendStates(states, req, jb.TgtType)
		return p, saved, nil
	}
	var byRelay map[*relayLink][]string
	for _, id := range minions {
		s := m.minions.session(id)
		if s != nil && s.relay != nil {
			// Behind a relay: one job per relay, below.
			if byRelay == nil {
				byRelay = make(map[*relayLink][]string)
			}
			byRelay[s.relay] = append(byRelay[s.relay], id)
			continue
		}
		if s == nil || !s.sendWire(wire) {
			p.notConnected = append(p.notConnected, id)
		}
	}
	if byRelay != nil {
		failed := m.fanOut(job, byRelay, masterMatched(req.Tgt, jb.TgtType, req.Delimiter))
		p.notConnected = append(p.notConnected, failed...)
	}
	m.log.Info("published job", zap.String("jid", jid), zap.String("fun", req.Fun),
		zap.Int("minions", len(minions)), zap.Int("not_connected", len(p.notConnected)))
	return p, saved, nil
}

// saltArgs is Salt's "arg" of a function: its positional arguments, then,
// if it has any, its keyword arguments as one map with "__kwarg__": true.
func saltArgs(arg []any, kwarg map[string]any) []any {
	out := append(make([]any, 0, len(arg)+1), arg...)
	if len(kwarg) > 0 {
		kw := map[string]any{"__kwarg__": true}
		for k, v := range kwarg {
			kw[k] = v
		}
		out = append(out, kw)
	}
	return out
}

// checkCompound checks a compound publication (req.Funs) and sets its Fun
// to the functions joined with ",", the Fun of its job.
func checkCompound(req *api.Request) error {
	if len(req.Funs) == 0 {
		if req.FunArgs != nil || req.FunKwargs != nil {
			return badRequest("per-function arguments without a list of functions")
		}
		return nil
	}
	joined := strings.Join(req.Funs, ",")
	switch {
	case req.Fun != "" && req.Fun != joined:
		return badRequest("fun %q is not the functions %q joined with commas", req.Fun, joined)
	case len(req.Arg) > 0 || len(req.Kwarg) > 0:
		return badRequest("a compound command's arguments go in its functions' argument lists")
	case req.FunArgs != nil && len(req.FunArgs) != len(req.Funs):
		return badRequest("%d functions and %d argument lists", len(req.Funs), len(req.FunArgs))
	case req.FunKwargs != nil && len(req.FunKwargs) != len(req.Funs):
		return badRequest("%d functions and %d keyword argument maps", len(req.Funs), len(req.FunKwargs))
	}
	req.Fun = joined
	return nil
}

// compoundArgs is Salt's "arg" of a compound job: one list per function.
func compoundArgs(req *api.Request) []any {
	out := make([]any, len(req.Funs))
	for i := range req.Funs {
		var arg []any
		var kwarg map[string]any
		if req.FunArgs != nil {
			arg = req.FunArgs[i]
		}
		if req.FunKwargs != nil {
			kwarg = req.FunKwargs[i]
		}
		out[i] = saltArgs(arg, kwarg)
	}
	return out
}

func tgtTypeOr(t string) string {
	if t == "" {
		return "glob"
	}
	return t
}
