package master

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// registry holds what the master knows of each minion: its grains (kept on
// disk under cachedir/minions, so targets still resolve for minions that are
// offline after a master restart) and its live session, if any.
type registry struct {
	dir string
	log *zap.Logger

	mu     sync.RWMutex
	grains map[string]minionGrains
	// fleet indexes the grains of every minion in grains, by value, for
	// match (targets.Fleet).
	fleet    *targets.Fleet
	sessions map[string]*session
	// presence since the last presence tick
	joined, left map[string]bool
	// handled is, for a device behind a relay whose session ended, what
	// that session handled (see attach).
	handled map[string]handledMark
}

// handledMark is the highest seq a relayed device's session stored or
// published, and the session's MAC key.
type handledMark struct {
	mac []byte
	seq uint64
}

func newRegistry(dir string, log *zap.Logger) (*registry, error) {
	r := &registry{
		dir: dir, log: log,
		grains:   make(map[string]minionGrains),
		fleet:    targets.NewFleet(),
		sessions: make(map[string]*session),
		joined:   make(map[string]bool),
		left:     make(map[string]bool),
		handled:  make(map[string]handledMark),
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make minion cache: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read minion cache: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if filepath.Ext(name) != ".grains" {
			continue
		}
		id := name[:len(name)-len(".grains")]
		if err := protocol.ValidID(id); err != nil {
			log.Warn("cached grains under an invalid id; ignored", zap.String("file", name), zap.Error(err))
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			log.Warn("read cached grains", zap.String("file", name), zap.Error(err))
			continue
		}
		var g map[string]any
		if err := protocol.Unmarshal(b, &g); err != nil {
			log.Warn("cached grains unreadable", zap.String("file", name), zap.Error(err))
			continue
		}
		mg := indexGrains(g)
		r.grains[id] = mg
		r.fleet.Set(id, targets.NewFleetEntry(mg.m, mg.idx))
	}
	return r, nil
}

// minionGrains is a minion's grains with their index, which targets match
// against (built when the grains change, not for every job).
type minionGrains struct {
	m   map[string]any
	idx *targets.Grains
}

func indexGrains(g map[string]any) minionGrains {
	return minionGrains{m: g, idx: targets.Index(g)}
}

// setGrains records a minion's grains in memory and on disk.
func (r *registry) setGrains(id string, g map[string]any) {
	mg := indexGrains(g) // outside the lock: matching goes on meanwhile
	fe := targets.NewFleetEntry(mg.m, mg.idx)
	r.mu.Lock()
	r.grains[id] = mg
	r.fleet.Set(id, fe)
	r.mu.Unlock()
	b, err := protocol.Marshal(g)
	if err != nil {
		r.log.Warn("encode grains", zap.String("id", id), zap.Error(err))
		return
	}
	path := filepath.Join(r.dir, id+".grains")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		err = os.Rename(tmp, path)
		if err != nil {
			r.log.Warn("save grains", zap.String("id", id), zap.Error(err))
		}
	}
}

func (r *registry) forget(id string) {
	r.mu.Lock()
	delete(r.grains, id)
	r.fleet.Delete(id)
	delete(r.handled, id)
	r.mu.Unlock()
	if err := os.Remove(filepath.Join(r.dir, id+".grains")); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("remove cached grains", zap.String("id", id), zap.Error(err))
	}
}

// resume sets s.handled, for a relayed session s (its key agreed, not
// yet visible to its relay's batches: handleBatch reads s.handled). A
// relay whose link to the master dropped resumes its devices' sessions on
// the next link with their Hellos as they were, which agree the same MAC
// key, and sends again what the master had not acknowledged: the acks of
// what it handled last may have been lost with the link. When s resumes
// the last session of its device (same MAC key), s.handled is set to what
// that session handled, so that it is not published twice.
func (r *registry) resume(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.handled[s.id]; ok {
		delete(r.handled, s.id)
		if s.relay != nil && s.mac != nil && subtle.ConstantTimeCompare(m.mac, s.mac) == 1 {
			s.handled = m.seq
		}
	}
}

// attach makes s the live session of its minion and returns the session it
// replaces, if any.
func (r *registry) attach(s *session) (old *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.sessions[s.id]
	r.sessions[s.id] = s
	if old == nil {
		if r.left[s.id] {
			delete(r.left, s.id)
		} else {
			r.joined[s.id] = true
		}
	}
	return old
}

// detach removes s if it is still its minion's live session.
func (r *registry) detach(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[s.id] == s {
		if s.relay != nil && s.mac != nil {
			r.handled[s.id] = handledMark{mac: s.mac, seq: s.ackable()}
		}
		delete(r.sessions, s.id)
		if r.joined[s.id] {
			delete(r.joined, s.id)
		} else {
			r.left[s.id] = true
		}
	}
}

func (r *registry) session(id string) *session {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sessions[id]
}

// connected returns the ids of connected minions, sorted.
func (r *registry) connected() []string {
	r.mu.RLock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	sort.Strings(ids)
	return ids
}

// countSessions returns how many minions are connected directly and how
// many behind a relay.
func (r *registry) countSessions() (direct, relayed int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.sessions {
		if s.relay != nil {
			relayed++
		} else {
			direct++
		}
	}
	return direct, relayed
}

// presenceChanges returns and resets the minions that joined and left since
// the last call.
func (r *registry) presenceChanges() (joined, left []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.joined {
		joined = append(joined, id)
	}
	for id := range r.left {
		left = append(left, id)
	}
	clear(r.joined)
	clear(r.left)
	sort.Strings(joined)
	sort.Strings(left)
	return joined, left
}

// match returns the ids among candidates (distinct) that m matches,
// sorted; m reads no pillar (see matchWith). The fleet index answers: the
// same minions as m.Match on each candidate's grains, without matching
// each one.
func (r *registry) match(m *targets.Matcher, candidates []string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.fleet.Select(m, candidates)
}

// matchWith is match with each minion's pillar from pillarOf.
func (r *registry) matchWith(m *targets.Matcher, candidates []string, pillarOf func(id string) map[string]any) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(candidates))
	mn := targets.Minion{}
	for _, id := range candidates {
		g := r.grains[id]
		mn.ID, mn.Grains, mn.Index, mn.Pillar = id, g.m, g.idx, pillarOf(id)
		if m.Match(&mn) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (r *registry) grainsOf(id string) map[string]any {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.grains[id].m
}

// allSessions returns the live sessions.
func (r *registry) allSessions() []*session {
	r.mu.RLock()
	defer r.mu.RUnlock()
	all := make([]*session, 0, len(r.sessions))
	for _, s := range r.sessions {
		all = append(all, s)
	}
	return all
}

func (r *registry) closeAll() {
	r.mu.RLock()
	all := make([]*session, 0, len(r.sessions))
	for _, s := range r.sessions {
		all = append(all, s)
	}
	r.mu.RUnlock()
	for _, s := range all {
		s.close(protocol.KindShutdown, "master shutting down")
	}
}
