package master

import (
	"fmt"
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
	return m.minions.match(matcher, all["minions"]), nil
}

// publish signs a job once, stores its load, fires salt/job/<jid>/new and
// sends the job to every connected minion the target matches. jid must come
// from m.jids; the caller subscribes to the job's returns before calling.
func (m *Master) publish(jid string, req *api.Request) (*published, error) {
	if err := checkReturn(req.Ret); err != nil {
		return nil, err
	}
	minions, err := m.expected(req.Tgt, req.TgtType, req.Delimiter)
	if err != nil {
		return nil, err
	}
	if len(minions) == 0 {
		return nil, &api.RemoteError{Code: api.CodeNoMinions, Msg: "No minions matched the target. No command was sent, no jid was assigned."}
	}
	user := req.User
	if user == "" {
		user = "root"
	}
	jobKwarg, err := m.syncKwargs(req) // engines.go: sync jobs carry the files
	if err != nil {
		return nil, err
	}
	jb := &protocol.JobBody{
		JID: jid, Tgt: req.Tgt, TgtType: tgtTypeOr(req.TgtType), Fun: req.Fun,
		Arg: req.Arg, Kwarg: jobKwarg, User: user, Ret: req.Ret, Master: m.name,
		Delimiter: req.Delimiter, Issued: time.Now().Unix(),
	}
	now := time.Now()
	load := &jobcache.Load{
		JID: jid, Tgt: req.Tgt, TgtType: jb.TgtType, Fun: req.Fun, Arg: req.Arg, Kwarg: req.Kwarg,
		Minions: minions, User: user, Ret: req.Ret, StartTime: now,
		RetConfig: req.ReturnConfig, RetKwargs: req.ReturnKwargs,
	}
	// A job the cache could not read back, or a device could not receive,
	// is refused before anything is stored or sent.
	encLoad, err := jobcache.EncodeLoad(load)
	if err != nil {
		return nil, &api.RemoteError{Code: api.CodeBadRequest, Msg: "job refused: " + err.Error()}
	}
	job, err := protocol.SignJob(m.id.Priv, jb)
	if err != nil {
		return nil, fmt.Errorf("sign job: %w", err)
	}
	body, err := protocol.Encode(job)
	if err != nil {
		return nil, fmt.Errorf("encode job: %w", err)
	}
	if len(body) > maxJobBody {
		return nil, &api.RemoteError{Code: api.CodeBadRequest,
			Msg: fmt.Sprintf("job refused: %d bytes encoded, more than the %d a device reads", len(body), maxJobBody)}
	}
	wire := protocol.AppendFrame(nil, body)
	if err := m.cache.SaveLoadEncoded(jid, encLoad); err != nil {
		// The job still runs; its returns are kept when they come.
		m.log.Error("save job load", zap.String("jid", jid), zap.Error(err))
	}
	if m.rets != nil {
		m.rets.jobPublished(load)
	}
	m.metrics.jobPublished(jid, now)
	arg := req.Arg
	if arg == nil {
		arg = []any{}
	}
	if len(req.Kwarg) > 0 {
		kw := map[string]any{"__kwarg__": true}
		for k, v := range req.Kwarg {
			kw[k] = v
		}
		arg = append(append([]any{}, arg...), kw)
	}
	m.bus.Publish(event.TagJobNew(jid), map[string]any{
		"jid": jid, "tgt": req.Tgt, "tgt_type": jb.TgtType, "fun": req.Fun, "arg": arg,
		"minions": minions, "missing": []string{}, "user": user, "_stamp": event.Stamp(now),
	})
	p := &published{jid: jid, minions: minions}
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
	return p, nil
}

func tgtTypeOr(t string) string {
	if t == "" {
		return "glob"
	}
	return t
}
