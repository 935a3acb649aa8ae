package keys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// DirProxied is not Salt's: for the key of a proxy minion (a key its relay
// made and holds for a device that cannot run the agent),
// pki_dir/minions_proxied/<id> holds the relay's id. The id is bound to
// that relay: another relay's proxy Hello for it is refused, and the key
// listing marks it "proxied by" the relay. Deleting the key forgets it.
const DirProxied = "minions_proxied"

// ProxiedKey is the key beside Salt's four under which the master's wheel
// (and halite-key --out json) gives Proxied: id -> relay, for the listed
// ids that are proxy minions.
const ProxiedKey = "proxied"

// loadProxied reads DirProxied; a file whose id has no key is removed.
func (s *Store) loadProxied() (map[string]string, error) {
	dir := filepath.Join(s.dir, DirProxied)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			if strings.HasPrefix(name, ".tmp-") {
				os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		known := false
		for st := range numStates {
			if _, ok := s.keys[st][name]; ok {
				known = true
			}
		}
		if !known {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				s.log.Warn("remove stale proxied file", zap.String("id", name), zap.Error(err))
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		relay := strings.TrimSpace(string(b))
		if err := protocol.ValidID(relay); err != nil {
			s.log.Warn("ignore proxied file with an invalid relay id", zap.String("id", name), zap.Error(err))
			continue
		}
		m[name] = relay
	}
	return m, nil
}

// ProxiedBy returns the relay the proxy minion id is bound to ("": id is
// no proxy minion).
func (s *Store) ProxiedBy(id string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.proxied[id]
}

// Proxied returns every proxy minion's relay, by id.
func (s *Store) Proxied() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.proxied))
	for id, r := range s.proxied {
		out[id] = r
	}
	return out
}

// ErrProxiedElsewhere refuses a proxy Hello for an id bound to another
// relay, or for an id whose key is not a proxy minion's.
var ErrProxiedElsewhere = errors.New("proxy minion bound elsewhere")

// CheckProxy is Check for the Hello of a proxy minion that relay presents
// with the key pub it holds for it. An id bound to another relay is
// refused (ErrProxiedElsewhere), as is an id that has a key of its own
// (an agent's, or a proxy key it was not bound with) that is not pub:
// a relay may not turn an agent into its proxy minion. Otherwise Check
// decides, and a key it leaves pending or accepted binds the id to relay.
func (s *Store) CheckProxy(id string, pub []byte, relay string) (Decision, error) {
	// The binding is written before Check writes the key, so that a key
	// listing never shows the proxy minion's key without its relay, and two
	// relays presenting the same new id cannot both bind it.
	s.mu.Lock()
	bound := s.proxied[id]
	if bound != "" && bound != relay {
		s.mu.Unlock()
		return Decision{}, fmt.Errorf("%w: %s is a proxy minion of relay %s, not of %s", ErrProxiedElsewhere, id, bound, relay)
	}
	if bound == "" {
		for st := range numStates {
			if _, ok := s.keys[st][id]; ok {
				s.mu.Unlock()
				return Decision{}, fmt.Errorf("%w: %s has a key that no relay holds for it (delete it with halite-key -d first to make it a proxy minion)", ErrProxiedElsewhere, id)
			}
		}
		if err := writeAtomic(filepath.Join(s.dir, DirProxied, id), []byte(relay+"\n")); err != nil {
			s.mu.Unlock()
			return Decision{}, fmt.Errorf("write relay of proxy minion %s: %w", id, err)
		}
		s.proxied[id] = relay
	}
	s.mu.Unlock()
	dec, err := s.Check(id, pub, relay)
	if bound == "" && (err != nil || (dec.Status != protocol.KeyAccepted && dec.Status != protocol.KeyPending)) {
		s.mu.Lock()
		delete(s.proxied, id)
		if err := os.Remove(filepath.Join(s.dir, DirProxied, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove proxied file", zap.String("id", id), zap.Error(err))
		}
		s.mu.Unlock()
	}
	return dec, err
}

// forgetProxied drops the binding of deleted ids that have no key left
// (the caller holds s.mu).
func (s *Store) forgetProxied(ids []string) {
next:
	for _, id := range ids {
		if _, ok := s.proxied[id]; !ok {
			continue
		}
		for st := range numStates {
			if _, ok := s.keys[st][id]; ok {
				continue next
			}
		}
		delete(s.proxied, id)
		if err := os.Remove(filepath.Join(s.dir, DirProxied, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("remove proxied file", zap.String("id", id), zap.Error(err))
		}
	}
}
