package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// The mine (Salt's salt/daemons/masterapi.py _mine, _mine_delete,
// _mine_flush, _mine_get): each agent's mine data, which it sends as an
// event tagged "_minion_mine" on its authenticated, acknowledged event
// path, kept in cachedir/minions/<id>.mine (CBOR, written atomically), as
// Salt keeps them in its minion data cache. An agent writes only its own
// mine. mine.get, from an agent (MineGet) or the halite-run runner, reads
// them under Salt's ACL: the master's mine_get option (id regex -> list of
// function regexes) for agents, and each entry's allow_tgt.

// mineTag is the agent's mine event (agent.MineTag).
const mineTag = "_minion_mine"

// Mine bounds: one agent's mine data, encoded.
const maxMineBytes = 4 << 20

// Salt's salt/utils/mine.py markers of an entry with a minion-side ACL.
const (
	mineACLID   = "__saltmine_acl__"
	mineACLData = "__data__"
)

// mineStore holds the agents' mine data, loaded on first use.
type mineStore struct {
	dir string
	mu  sync.Mutex
	ids map[string]map[string]any // id -> function -> data; nil until loaded
}

func (s *mineStore) path(id string) string { return filepath.Join(s.dir, id+".mine") }

// get returns id's mine (nil: none). Under s.mu.
func (s *mineStore) get(id string) (map[string]any, error) {
	if d, ok := s.ids[id]; ok {
		return d, nil
	}
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		s.ids[id] = nil
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mine of %s: %w", id, err)
	}
	var d map[string]any
	if err := protocol.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("mine of %s unreadable: %w", id, err)
	}
	s.ids[id] = d
	return d, nil
}

// put replaces id's mine. Under s.mu.
func (s *mineStore) put(id string, d map[string]any) error {
	if len(d) == 0 {
		if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("flush mine of %s: %w", id, err)
		}
		s.ids[id] = nil
		return nil
	}
	b, err := protocol.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode mine of %s: %w", id, err)
	}
	if len(b) > maxMineBytes {
		return fmt.Errorf("mine of %s is %d bytes encoded, over the %d limit", id, len(b), maxMineBytes)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("store mine of %s: %w", id, err)
	}
	if err := atomicfile.Write(s.path(id), b, 0o600); err != nil {
		return fmt.Errorf("store mine of %s: %w", id, err)
	}
	s.ids[id] = d
	return nil
}

// mine returns the master's mine store.
func (m *Master) mineStore() *mineStore {
	m.mineOnce.Do(func() {
		m.mine = &mineStore{dir: filepath.Join(m.cfg.CacheDir, "minions"), ids: map[string]map[string]any{}}
	})
	return m.mine
}

// mineEvent applies an agent's mine event (tag "_minion_mine") to its own
// mine and reports whether the event was one; bad ones are logged and
// dropped (the agent's ack goes all the same: sent again, it would be bad
// again).
func (m *Master) mineEvent(id string, tag string, data map[string]any) bool {
	if tag != mineTag {
		return false
	}
	if err := m.applyMine(id, data); err != nil {
		m.log.Warn("mine data refused", zap.String("id", id), zap.Error(err))
	}
	return true
}

func (m *Master) applyMine(id string, load map[string]any) error {
	s := m.mineStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.get(id)
	if err != nil {
		m.log.Warn("mine data replaced", zap.Error(err))
		cur = nil
	}
	next := make(map[string]any, len(cur)+4)
	switch load["cmd"] {
	case "_mine":
		data, ok := load["data"].(map[string]any)
		if !ok {
			return fmt.Errorf("_mine: data is not a mapping")
		}
		if clear, _ := load["clear"].(bool); !clear {
			for k, v := range cur {
				next[k] = v
			}
		}
		for k, v := range data {
			next[k] = v
		}
	case "_mine_delete":
		fun, ok := load["fun"].(string)
		if !ok {
			return fmt.Errorf("_mine_delete: fun is not a string")
		}
		for k, v := range cur {
			if k != fun {
				next[k] = v
			}
		}
	case "_mine_flush":
	default:
		return fmt.Errorf("unknown mine command %v", load["cmd"])
	}
	return s.put(id, next)
}

// mineGet is Salt's _mine_get: the mine data of the minions tgt matches,
// for fun (comma-separated: several, and the result is keyed by function
// first). asker is the agent asking ("" for the master's own runner,
// which no ACL limits).
func (m *Master) mineGet(asker, tgt, fun, tgtType string) (map[string]any, error) {
	var functions []string
	for _, f := range uniq(strings.Split(fun, ",")) {
		if f = strings.TrimSpace(f); f != "" {
			functions = append(functions, f)
		}
	}
	byFun := len(functions) > 1
	if asker != "" {
		allowed, err := m.mineGetACL(asker, functions)
		if err != nil {
			return nil, err
		}
		functions = allowed
	}
	ret := map[string]any{}
	if len(functions) == 0 {
		return ret, nil
	}
	switch strings.ToLower(tgtType) {
	case "":
		tgtType = "glob"
	case "pillar": // Salt matches pillar targets exactly for the mine
		tgtType = "pillar_exact"
	}
	ids, err := m.expected(tgt, tgtType, "")
	if err != nil {
		return nil, err
	}
	s := m.mineStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	allowedBy := map[string][]string{} // allow_tgt/type -> ids, once per request
	for _, id := range ids {
		data, err := s.get(id)
		if err != nil {
			m.log.Warn("mine.get", zap.Error(err))
			continue
		}
		for _, f := range functions {
			entry, ok := data[f]
			if !ok {
				continue
			}
			if e, ok := entry.(map[string]any); ok && e[mineACLID] != nil {
				entry = e[mineACLData]
				if at, _ := e["allow_tgt"].(string); at != "" && asker != "" {
					att, _ := e["allow_tgt_type"].(string)
					if att == "" {
						att = "glob"
					}
					key := att + "\x00" + at
					who, ok := allowedBy[key]
					if !ok {
						who, _ = m.expected(at, att, "")
						allowedBy[key] = who
					}
					if !contains(who, asker) {
						continue
					}
				}
			}
			if byFun {
				sub, _ := ret[f].(map[string]any)
				if sub == nil {
					sub = map[string]any{}
					ret[f] = sub
				}
				sub[id] = entry
			} else {
				ret[id] = entry
			}
		}
	}
	return ret, nil
}

// mineGetACL is the master-side ACL of Salt's _mine_get: with the
// mine_get option set (id regex -> list of function regexes), only the
// functions a matching entry allows; without it, all.
func (m *Master) mineGetACL(asker string, functions []string) ([]string, error) {
	acl := m.cfg.MineGet
	if acl == nil {
		return functions, nil
	}
	var perms []*regexp.Regexp
	for pat, v := range acl {
		re, err := regexp.Compile("^(?:" + pat + ")")
		if err != nil || !re.MatchString(asker) {
			continue
		}
		l, _ := v.([]any)
		for _, p := range l {
			if s, ok := p.(string); ok {
				if pre, err := regexp.Compile("^(?:" + s + ")"); err == nil {
					perms = append(perms, pre)
				}
			}
		}
	}
	var out []string
	for _, f := range functions {
		for _, p := range perms {
			if p.MatchString(f) {
				out = append(out, f)
				break
			}
		}
	}
	return out, nil
}

// answerMineGet answers an agent's MineGet on its session.
func (m *Master) answerMineGet(s *session, g *protocol.MineGet) {
	reply := &protocol.MineData{Req: g.Req}
	data, err := m.mineGet(s.id, g.Tgt, g.Fun, g.TgtType)
	if err != nil {
		reply.Err = err.Error()
	} else {
		reply.Data = data
	}
	b, err := protocol.Encode(reply)
	if err == nil && len(b) > m.maxFrame()-16 {
		b, err = protocol.Encode(&protocol.MineData{Req: g.Req, Err: "mine data too large for one frame; ask for fewer minions or functions"})
	}
	if err != nil {
		s.log.Warn("mine.get answer", zap.Error(err))
		return
	}
	s.send(b)
}

// uniq drops repeated names, keeping the order.
func uniq(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// mineRunners are mine.get, as Salt's mine runner module.
func mineRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{
		"mine.get": func(_ context.Context, req *api.Request) (any, error) {
			a := &args{req: req}
			tgt, err := a.str(0, "tgt", true)
			if err != nil {
				return nil, err
			}
			fun, err := a.str(1, "fun", true)
			if err != nil {
				return nil, err
			}
			tgtType, err := a.str(2, "tgt_type", false)
			if err != nil {
				return nil, err
			}
			return m.mineGet("", tgt, fun, tgtType)
		},
	}
}
