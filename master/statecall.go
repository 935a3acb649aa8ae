package master

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/master/statecomp"
	"github.com/halite-fleet/halite/protocol"
)

// halite-call state.apply on a device with a master (StateGet): the
// device's agent asks on its own session, and the master compiles for
// that session's id alone, exactly as a publish compiles for it, and
// answers with a job signed as a publish signs it (StateJob): __state__,
// __for__ naming the device, and the request's nonce in __nonce__. The
// device runs it in halite-call and returns under the job's jid, as Salt's
// salt-call returns its job to the master (salt/cli/caller.py
// BaseCaller.call, return_pub with jid "req"; the master gives it a jid
// and stores the load with tgt the minion's id, salt/utils/job.py
// store_job): here the master gives the jid when it compiles, and stores
// the load then.

// stateCallUser is the user of a halite-call job's load.
const stateCallUser = "halite-call"

// maxStateCalls bounds the compiles for StateGet running at once on the
// master; more wait. One device has one at a time.
const maxStateCalls = 4

var (
	stateCallSlots = make(chan struct{}, maxStateCalls)
	stateCalling   sync.Map // *session -> struct{}: a compile runs for it
)

// answerStateGet compiles for s's agent, in the background (a compile may
// take a while; the session's reader goes on), and answers on s.
func (m *Master) answerStateGet(s *session, g *protocol.StateGet) {
	if _, busy := stateCalling.LoadOrStore(s, struct{}{}); busy {
		m.sendStateJob(s, &protocol.StateJob{Req: g.Req, Err: "a state compile for " + s.id + " is already running"})
		return
	}
	m.connWG.Add(1)
	go func() {
		defer m.connWG.Done()
		defer stateCalling.Delete(s)
		select {
		case stateCallSlots <- struct{}{}:
		case <-s.done:
			return
		case <-m.closing:
			return
		}
		defer func() { <-stateCallSlots }()
		job, err := m.compileFor(s, g)
		reply := &protocol.StateJob{Req: g.Req}
		if err != nil {
			reply.Err = err.Error()
		} else {
			reply.Job = job.Signed
		}
		m.sendStateJob(s, reply)
	}()
}

func (m *Master) sendStateJob(s *session, j *protocol.StateJob) {
	b, err := protocol.Encode(j)
	if err != nil {
		s.log.Warn("state compile answer", zap.Error(err))
		return
	}
	s.send(b)
}

// compileFor compiles g's state function for s's device and signs it into
// a job for it alone, sealed to it (or refused, or in the clear, as
// compileStates decides for a published job), whose load it stores.
func (m *Master) compileFor(s *session, g *protocol.StateGet) (*protocol.Job, error) {
	id := s.id
	if !statecomp.Compiles(g.Fun) {
		return nil, fmt.Errorf("%s is not a state function the master compiles", g.Fun)
	}
	// The device's own keyword arguments, without the ones that carry
	// the master's data (__state__, __for__, __nonce__, __pub_*): those
	// only the master sets.
	kwarg := make(map[string]any, len(g.Kwarg)+1)
	for k, v := range g.Kwarg {
		if !strings.HasPrefix(k, "__") {
			kwarg[k] = v
		}
	}
	req := &api.Request{Fun: g.Fun, Arg: g.Arg, Kwarg: kwarg}
	sreq, err := stateRequest(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	results, _ := m.stateCompiler().Compile(sreq, []statecomp.Device{{ID: id, Grains: m.minions.grainsOf(id)}})
	if len(results) != 1 {
		return nil, fmt.Errorf("state compile for %s gave %d results", id, len(results))
	}
	jid := m.jids.Next()
	load := &jobcache.Load{JID: jid, Tgt: id, TgtType: "glob", Fun: g.Fun, Arg: g.Arg, Kwarg: kwarg,
		Minions: []string{id}, User: stateCallUser, StartTime: start}
	encLoad, err := jobcache.EncodeLoad(load)
	if err != nil {
		return nil, fmt.Errorf("job refused: %w", err)
	}
	signed := make(map[string]any, len(kwarg)+1)
	for k, v := range kwarg {
		signed[k] = v
	}
	signed["__nonce__"] = hex.EncodeToString(g.Nonce)
	jb := &protocol.JobBody{JID: jid, Tgt: id, TgtType: "glob", Fun: g.Fun, Arg: g.Arg, Kwarg: signed,
		User: stateCallUser, Master: m.name, Issued: start.Unix()}
	st := results[0].State
	var to map[string]ed25519.PublicKey
	switch {
	case s.caps >= protocol.CapSealedState:
		pub, err := m.sealKey(s)
		if err != nil {
			return nil, err
		}
		to = map[string]ed25519.PublicKey{id: pub}
	case len(sreq.Pillar) > 0 || len(m.pillarOf(id)) > 0:
		st = refusedState(g.Fun)
	}
	sg, err := m.signState(jb, st, []string{id}, true, to)
	if err != nil {
		return nil, err
	}
	if err := m.cache.SaveLoadEncoded(jid, encLoad); err != nil {
		// The device still runs it; its return is kept when it comes.
		m.log.Error("save job load", zap.String("jid", jid), zap.Error(err))
	}
	m.log.Info("compiled states for halite-call", zap.String("id", id), zap.String("fun", g.Fun),
		zap.String("jid", jid), zap.Duration("took", time.Since(start)))
	return sg.job, nil
}
