package master

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/statecomp"
	"github.com/halite-fleet/halite/protocol"
)

// maxForIDs is how many device ids one variant's job names in __for__;
// a variant with more is sent as several jobs.
const maxForIDs = 256

// compilers holds each Master's state compiler, made on first use and
// again when the config changes (a field of Master once the master's
// struct settles).
var compilers sync.Map // *Master -> *masterCompiler

type masterCompiler struct {
	cfg *config.Master
	c   *statecomp.Compiler
}

func (m *Master) stateCompiler() *statecomp.Compiler {
	if v, ok := compilers.Load(m); ok && v.(*masterCompiler).cfg == m.cfg {
		return v.(*masterCompiler).c
	}
	mc := &masterCompiler{cfg: m.cfg, c: statecomp.New(statecomp.Options{
		Files: m.files, Top: m.cfg.StateTop, Pillar: m.pillarOf, Opts: m.cfg.Raw, Nodegroups: m.cfg.Nodegroups,
	})}
	compilers.Store(m, mc)
	return mc.c
}

// stateJobs are a state job's signed variants: the devices with equal
// compiled states share one.
type stateJobs struct {
	groups []stateGroup
	stats  statecomp.Stats
}

type stateGroup struct {
	ids  []string
	job  *protocol.Job
	wire []byte
	many bool // __for__ names the ids: relays are told them too
}

// compileStates compiles a state function's job for every device it
// targets and signs one job per variant, each with its compiled state in
// Kwarg["__state__"] (and "__for__", the ids it is for, when the job has
// more than one variant). nil for functions that compile nothing.
//
// Compiled states hold values rendered from pillar, so they go sealed
// (protocol.SealKwargs: the states encrypted once per variant job, its
// key sealed to each device's accepted key) to every device whose agent
// opens sealed jobs (capability 13). An older agent gets the states in
// the clear only when no pillar went into its compile (its pillar and the
// job's pillar= are empty); otherwise it gets a compile error saying to
// upgrade it: pillar never crosses a relay in the clear.
func (m *Master) compileStates(req *api.Request, jb *protocol.JobBody, minions []string) (*stateJobs, error) {
	if len(req.Funs) > 0 || !statecomp.Compiles(req.Fun) {
		return nil, nil
	}
	sreq, err := stateRequest(req)
	if err != nil {
		return nil, &api.RemoteError{Code: api.CodeBadRequest, Msg: err.Error()}
	}
	devs := make([]statecomp.Device, len(minions))
	for i, id := range minions {
		devs[i] = statecomp.Device{ID: id, Grains: m.minions.grainsOf(id)}
	}
	results, stats := m.stateCompiler().Compile(sreq, devs)
	type groupKey struct {
		sum   [32]byte
		class sealClass
	}
	byGroup := map[groupKey][]int{}
	var order []groupKey
	sj := &stateJobs{stats: stats}
	keys := make(map[string]ed25519.PublicKey, len(minions))
	for i, r := range results {
		class, pub := m.sealClassOf(minions[i], len(sreq.Pillar) > 0)
		if pub != nil {
			keys[minions[i]] = pub
		}
		k := groupKey{r.Sum, class}
		if _, ok := byGroup[k]; !ok {
			order = append(order, k)
		}
		byGroup[k] = append(byGroup[k], i)
	}
	many := len(order) > 1
	for _, k := range order {
		idx := byGroup[k]
		st := results[idx[0]].State
		if k.class == sealRefused {
			st = refusedState(jb.Fun)
		}
		for start := 0; start < len(idx); start += maxForIDs {
			part := idx[start:min(start+maxForIDs, len(idx))]
			if !many {
				part = idx
			}
			ids := make([]string, len(part))
			var to map[string]ed25519.PublicKey
			if k.class == sealSealed {
				to = make(map[string]ed25519.PublicKey, len(part))
			}
			for i, x := range part {
				ids[i] = minions[x]
				if to != nil {
					to[ids[i]] = keys[ids[i]]
				}
			}
			g, err := m.signState(jb, st, ids, many, to)
			if err != nil {
				return nil, err
			}
			sj.groups = append(sj.groups, g)
			if !many {
				break
			}
		}
	}
	return sj, nil
}

// sealClass is how a device gets its compiled states.
type sealClass uint8

const (
	sealSealed  sealClass = iota // sealed to its key (capability 13)
	sealPlain                    // in the clear: an older agent, and no pillar in its compile
	sealRefused                  // an older agent whose compile had pillar: an error instead
)

// sealClassOf says how device id gets its states, and the key to seal
// them to. cliPillar: the job has a pillar= of its own. A device not
// connected gets nothing (sendStates), but is classed as an older agent:
// should it connect meanwhile, what it gets holds no pillar.
func (m *Master) sealClassOf(id string, cliPillar bool) (sealClass, ed25519.PublicKey) {
	if s := m.minions.session(id); s != nil && s.caps >= protocol.CapSealedState {
		if pub, err := m.sealKey(s); err == nil {
			return sealSealed, pub
		}
	}
	if cliPillar || len(m.pillarOf(id)) > 0 {
		return sealRefused, nil
	}
	return sealPlain, nil
}

// refusedState is the __state__ of a state job refused to an agent too
// old to open sealed jobs.
func refusedState(fun string) map[string]any {
	return map[string]any{"low": []any{}, "errors": []any{fmt.Sprintf(
		"%s refused: the states compiled for this device hold pillar data, which the master sends only sealed, "+
			"and this agent is too old to open sealed state jobs (capability %d wanted): upgrade halite-agent",
		fun, protocol.CapSealedState)}}
}

// signState signs jb with st as __state__ for ids: sealed to each of to
// when to is not nil (SealKwargs: __sealed__ and __keys__ instead of
// __state__). A state job never carries the job's pillar= in the clear:
// the master compiled with it, the device has no use for it.
func (m *Master) signState(jb *protocol.JobBody, st map[string]any, ids []string, many bool, to map[string]ed25519.PublicKey) (stateGroup, error) {
	b := *jb
	b.Kwarg = make(map[string]any, len(jb.Kwarg)+2)
	for k, v := range jb.Kwarg {
		if k != "pillar" {
			b.Kwarg[k] = v
		}
	}
	setState := func(st map[string]any) error {
		if to == nil {
			b.Kwarg["__state__"] = st
			return nil
		}
		sealed, keys, err := protocol.SealKwargs(b.JID, map[string]any{"__state__": st}, to)
		if err != nil {
			return err
		}
		b.Kwarg[protocol.KwargSealed], b.Kwarg[protocol.KwargKeys] = sealed, keys
		return nil
	}
	if err := setState(st); err != nil {
		return stateGroup{}, err
	}
	if many {
		b.Kwarg["__for__"] = toAnyList(ids)
	}
	job, err := protocol.SignJob(m.id.Priv, &b)
	if err != nil {
		return stateGroup{}, fmt.Errorf("sign job: %w", err)
	}
	body, err := protocol.Encode(job)
	if err == nil && len(body) > maxJobBody {
		err = fmt.Errorf("compiled state is %d bytes encoded, more than the %d a device reads", len(body), maxJobBody)
	}
	if err != nil {
		// The devices get the reason, as a compile error.
		if err := setState(map[string]any{"low": []any{}, "errors": []any{"state job refused: " + err.Error()}}); err != nil {
			return stateGroup{}, err
		}
		if job, err = protocol.SignJob(m.id.Priv, &b); err != nil {
			return stateGroup{}, fmt.Errorf("sign job: %w", err)
		}
		if body, err = protocol.Encode(job); err != nil {
			return stateGroup{}, fmt.Errorf("encode job: %w", err)
		}
	}
	return stateGroup{ids: ids, job: job, wire: protocol.AppendFrame(nil, body), many: many}, nil
}

// sendStates sends each variant's job to its devices, directly or through
// their relays, and returns the ids it could not send to.
func (m *Master) sendStates(sj *stateJobs, req *api.Request, tgtType string) (notConnected []string) {
	needIDs := masterMatched(req.Tgt, tgtType, req.Delimiter)
	for _, g := range sj.groups {
		var byRelay map[*relayLink][]string
		for _, id := range g.ids {
			s := m.minions.session(id)
			if s != nil && s.relay != nil {
				if byRelay == nil {
					byRelay = make(map[*relayLink][]string)
				}
				byRelay[s.relay] = append(byRelay[s.relay], id)
				continue
			}
			if s == nil || !s.sendWire(g.wire) {
				notConnected = append(notConnected, id)
			}
		}
		if byRelay != nil {
			notConnected = append(notConnected, m.fanOut(g.job, byRelay, needIDs || g.many)...)
		}
	}
	if sj.stats.Devices == 0 { // firmware.update's variants (firmware.go)
		m.log.Info("published job variants", zap.String("fun", req.Fun), zap.Int("jobs", len(sj.groups)),
			zap.Int("not_connected", len(notConnected)))
		sort.Strings(notConnected)
		return notConnected
	}
	m.log.Info("compiled states", zap.String("fun", req.Fun), zap.Int("devices", sj.stats.Devices),
		zap.Int("compiled", sj.stats.Compiled), zap.Int("variants", sj.stats.Variants),
		zap.Int("jobs", len(sj.groups)), zap.Duration("took", sj.stats.Took))
	sort.Strings(notConnected)
	return notConnected
}

// stateRequest reads a state function's arguments as Salt's state.apply
// does (salt/modules/state.py): mods as the first argument or mods=, a
// string "a,b" or a list; saltenv=; pillar= a mapping (or its JSON or
// YAML text, as the CLI gives it); test=.
func stateRequest(req *api.Request) (statecomp.Request, error) {
	sr := statecomp.Request{Fun: req.Fun}
	var mods any
	if len(req.Arg) > 0 {
		mods = req.Arg[0]
	}
	if v, ok := req.Kwarg["mods"]; ok {
		mods = v
	}
	switch v := mods.(type) {
	case nil:
	case string:
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				sr.Mods = append(sr.Mods, s)
			}
		}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return sr, fmt.Errorf("mods: %v is not an SLS name", x)
			}
			sr.Mods = append(sr.Mods, s)
		}
	default:
		return sr, fmt.Errorf("mods: %v is not an SLS name or a list of them", v)
	}
	if v, ok := req.Kwarg["saltenv"].(string); ok {
		sr.Saltenv = v
	}
	if v, ok := req.Kwarg["test"]; ok {
		sr.Test = v
	}
	if req.Fun == "state.test" {
		sr.Test = true
	}
	switch p := req.Kwarg["pillar"].(type) {
	case nil:
	case map[string]any:
		sr.Pillar = p
	case string:
		var m map[string]any
		if err := json.Unmarshal([]byte(p), &m); err != nil {
			if err := yaml.Unmarshal([]byte(p), &m); err != nil {
				return sr, fmt.Errorf("pillar: not a mapping: %v", err)
			}
		}
		sr.Pillar = m
	default:
		return sr, fmt.Errorf("Pillar data must be formatted as a dictionary")
	}
	return sr, nil
}
