package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// halite-call state.apply on a device with a master: halite-call asks the
// running agent (local op "state.get"), the agent asks its master on its
// session (StateGet, with a fresh nonce), and the master answers with a
// job it compiled and signed for this device (StateJob). The agent checks
// it as it checks a published job — the master's signature, then that it
// is for this device alone and answers this request (its __nonce__) — and
// records its jid in the job log, so that a relay cannot also deliver it
// as a published job. halite-call runs it in its own process, as salt-call
// does, and gives the return back (local op "return"), which goes to the
// master like a job's return, under the job's jid (salt/cli/caller.py
// BaseCaller.call: return_pub).

// stateGetTimeout bounds the wait for the master's compile (the master's
// own bound on one compile is two minutes).
const stateGetTimeout = 150 * time.Second

// maxStateCalls bounds the jids of halite-call jobs waiting for their
// return; the oldest is forgotten past it.
const maxStateCalls = 64

// stateCallState is the agent's side of StateGet.
type stateCallState struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan *protocol.StateJob
	jobs    map[string]*outbox // jid -> the outbox its return goes to
	order   []string           // of jobs, oldest first
	// The manifests of the salt:// files in the jobs handed to
	// halite-call (by hex SHA-256, oldest first in mfOrder): the files
	// it may ask the agent to fetch (local op "blob.fetch").
	manifests map[string]protocol.Manifest
	mfOrder   []string
}

// maxCallManifests bounds the manifests kept for halite-call.
const maxCallManifests = 1024

// noteManifests records the manifests of the salt:// files in a
// verified state job's chunks ("__files__" entries with a "manifest").
func (a *Agent) noteManifests(kwarg map[string]any) {
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 8 {
			return
		}
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e, depth+1)
			}
		case map[string]any:
			files, _ := x["__files__"].(map[string]any)
			for _, e := range files {
				ent, _ := e.(map[string]any)
				if ent["manifest"] == nil {
					continue
				}
				m, err := protocol.ManifestFromAny(ent["manifest"])
				if err != nil || m.Validate() != nil {
					continue
				}
				k := hex.EncodeToString(m.SHA256)
				a.stcall.mu.Lock()
				if a.stcall.manifests == nil {
					a.stcall.manifests = make(map[string]protocol.Manifest)
				}
				if _, ok := a.stcall.manifests[k]; !ok {
					a.stcall.manifests[k] = m
					a.stcall.mfOrder = append(a.stcall.mfOrder, k)
					for len(a.stcall.mfOrder) > maxCallManifests {
						delete(a.stcall.manifests, a.stcall.mfOrder[0])
						a.stcall.mfOrder = a.stcall.mfOrder[1:]
					}
				}
				a.stcall.mu.Unlock()
			}
			if x["__files__"] == nil {
				for _, e := range x {
					walk(e, depth+1)
				}
			}
		}
	}
	walk(kwarg, 0)
}

// callFetch fetches, for halite-call, the file of hex SHA-256 sum named
// by a manifest of a job the agent handed it, into the state cache
// (agent/state/fetch.go's place for it), and returns its path.
func (a *Agent) callFetch(ctx context.Context, sum string) (string, error) {
	a.stcall.mu.Lock()
	m, ok := a.stcall.manifests[sum]
	a.stcall.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("no job this agent handed to halite-call names a file of sha256 %q", sum)
	}
	dir := filepath.Join(stateCacheDir(a.cfg.CacheDir), "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(dir, sum)
	if err := a.Fetcher().Fetch(ctx, m, p); err != nil {
		return "", err
	}
	return p, nil
}

// stateReply hands a StateJob to the request waiting for it.
func (a *Agent) stateReply(j *protocol.StateJob) {
	a.stcall.mu.Lock()
	ch, ok := a.stcall.waiting[j.Req]
	delete(a.stcall.waiting, j.Req)
	a.stcall.mu.Unlock()
	if !ok {
		a.log.Debug("state job nobody waits for; dropped", zap.Uint64("req", j.Req))
		return
	}
	ch <- j
}

// stateGet asks the master to compile fun for this agent and returns the
// verified job's jid, arguments and keyword arguments (with __state__).
func (a *Agent) stateGet(ctx context.Context, fun string, args []any, kwargs map[string]any) (map[string]any, error) {
	if a.masterless() {
		return nil, fmt.Errorf("%s: this agent has no master; run it with halite-call --local", fun)
	}
	var l *link
	a.mine.mu.Lock()
	for _, k := range a.links {
		if a.mine.caps[k.out] >= protocol.CapStateCall {
			l = k
			break
		}
	}
	a.mine.mu.Unlock()
	if l == nil {
		if a.nconn.Load() == 0 {
			return nil, fmt.Errorf("%s: no master connected", fun)
		}
		return nil, fmt.Errorf("%s: the master (or its relay) is too old to compile for halite-call (capability %d wanted)", fun, protocol.CapStateCall)
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ch := make(chan *protocol.StateJob, 1)
	a.stcall.mu.Lock()
	if a.stcall.waiting == nil {
		a.stcall.waiting = make(map[uint64]chan *protocol.StateJob)
	}
	a.stcall.next++
	req := a.stcall.next
	a.stcall.waiting[req] = ch
	a.stcall.mu.Unlock()
	defer func() {
		a.stcall.mu.Lock()
		delete(a.stcall.waiting, req)
		a.stcall.mu.Unlock()
	}()
	l.out.push(&protocol.StateGet{Req: req, Fun: fun, Arg: args, Kwarg: kwargs, Nonce: nonce})
	t := time.NewTimer(stateGetTimeout)
	defer t.Stop()
	var sj *protocol.StateJob
	select {
	case sj = <-ch:
	case <-t.C:
		return nil, fmt.Errorf("%s: no answer from the master within %s", fun, stateGetTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if sj.Err != "" {
		return nil, fmt.Errorf("%s: the master did not compile: %s", fun, sj.Err)
	}
	b, err := a.checkStateJob(&protocol.Job{Signed: sj.Job}, fun, hex.EncodeToString(nonce))
	if err != nil {
		a.log.Warn("refusing the master's compiled states", zap.Error(err))
		return nil, fmt.Errorf("%s: refused the master's answer: %w", fun, err)
	}
	ok, why, err := a.jobs.take(b, l.addr)
	if err != nil {
		a.log.Error("job log", zap.String("jid", b.JID), zap.Error(err))
	}
	if !ok {
		return nil, fmt.Errorf("%s: refused the master's answer: %s", fun, why)
	}
	if err := a.jobs.done(b); err != nil {
		a.log.Warn("job log", zap.String("jid", b.JID), zap.Error(err))
	}
	a.stcall.mu.Lock()
	if a.stcall.jobs == nil {
		a.stcall.jobs = make(map[string]*outbox)
	}
	a.stcall.jobs[b.JID] = l.out
	a.stcall.order = append(a.stcall.order, b.JID)
	for len(a.stcall.order) > maxStateCalls {
		delete(a.stcall.jobs, a.stcall.order[0])
		a.stcall.order = a.stcall.order[1:]
	}
	a.stcall.mu.Unlock()
	a.noteManifests(b.Kwarg)
	arg := b.Arg
	if arg == nil {
		arg = []any{}
	}
	return map[string]any{"jid": b.JID, "fun": b.Fun, "arg": arg, "kwarg": b.Kwarg}, nil
}

// checkStateJob verifies the master's answer to a StateGet for fun whose
// nonce was nonce (hex): signed by the pinned master key, of fun, for this
// device alone, and answering this request.
func (a *Agent) checkStateJob(j *protocol.Job, fun, nonce string) (*protocol.JobBody, error) {
	pub := a.masterPub.Load()
	if pub == nil {
		return nil, fmt.Errorf("the master's key is not pinned yet")
	}
	b, err := j.Open(*pub)
	if err != nil {
		return nil, err
	}
	if b.Fun != fun || len(b.Funs) > 0 {
		return nil, fmt.Errorf("job %s is of %s, not %s", b.JID, b.Fun, fun)
	}
	if got, _ := b.Kwarg["__nonce__"].(string); got != nonce {
		return nil, fmt.Errorf("job %s does not answer this request (its nonce differs)", b.JID)
	}
	if err := a.openSealed(b); err != nil {
		return nil, err
	}
	ids, _ := b.Kwarg["__for__"].([]any)
	if b.Tgt != a.cfg.ID || len(ids) != 1 || ids[0] != a.cfg.ID {
		return nil, fmt.Errorf("job %s was compiled for %v, not for %s alone", b.JID, b.Kwarg["__for__"], a.cfg.ID)
	}
	if _, ok := b.Kwarg["__state__"].(map[string]any); !ok {
		return nil, fmt.Errorf("job %s carries no compiled states", b.JID)
	}
	return b, nil
}

// stateReturn queues halite-call's return of a job that stateGet handed
// it, to the master that compiled it.
func (a *Agent) stateReturn(d map[string]any) error {
	jid, _ := d["jid"].(string)
	a.stcall.mu.Lock()
	out := a.stcall.jobs[jid]
	delete(a.stcall.jobs, jid)
	a.stcall.mu.Unlock()
	if out == nil {
		return fmt.Errorf("no halite-call job %q waits for its return", jid)
	}
	fun, _ := d["fun"].(string)
	funArgs, _ := d["fun_args"].([]any)
	success, _ := d["success"].(bool)
	retcode := 0
	switch n := d["retcode"].(type) {
	case int64:
		retcode = int(n)
	case uint64:
		retcode = int(min(n, 1<<31-1))
	}
	return a.queueReturn(out, &protocol.ReturnBody{ID: a.cfg.ID, JID: jid, Fun: fun, FunArgs: funArgs,
		Return: d["return"], Retcode: retcode, Success: success})
}

// CompiledByMaster reports whether halite-call asks the master to compile
// fun on a device that has one: the state functions the master compiles
// for a publish (master/statecomp.Compiles).
func CompiledByMaster(fun string) bool {
	switch fun {
	case "state.apply", "state.test", "state.highstate", "state.sls", "state.show_top",
		"state.show_highstate", "state.show_sls", "state.show_lowstate", "state.show_low_sls":
		return true
	}
	return false
}
