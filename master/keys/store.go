package keys

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// Directory names under pki_dir, as Salt names them. They are also the keys
// of List and Finger, Salt's JSON shape for salt-key --out json.
const (
	DirAccepted = "minions"
	DirPending  = "minions_pre"
	DirRejected = "minions_rejected"
	DirDenied   = "minions_denied"
	// DirPendingVia is not Salt's: for a pending key that came through a
	// relay, pki_dir/minions_pre_via/<id> holds the relay's id.
	DirPendingVia = "minions_pre_via"
)

// RelaysKey is the key beside Salt's four under which the master's wheel
// (and halite-key --out json) gives PendingVia: pending id -> relay id.
const RelaysKey = "relays"

// InvalidKey is the key beside Salt's four under which the master's wheel
// (and halite-key) lists Invalid: key files whose names are not valid ids.
const InvalidKey = "invalid"

// Acts of a Decision and a Change: the "act" field of Salt's salt/auth and
// salt/key events.
const (
	ActAccept = "accept"
	ActPend   = "pend"
	ActReject = "reject"
	ActDenied = "denied"
	ActDelete = "delete"
)

// state indexes the four key states.
type state int

const (
	accepted state = iota
	pending
	rejected
	denied
	numStates
)

var (
	stateDirs  = [numStates]string{DirAccepted, DirPending, DirRejected, DirDenied}
	stateNames = [numStates]string{protocol.KeyAccepted, protocol.KeyPending, protocol.KeyRejected, protocol.KeyDenied}
)

// Options configure a Store with the master's options of the same names.
type Options struct {
	AutoAccept     bool   // auto_accept
	AutosignFile   string // autosign_file; "" for none
	AutorejectFile string // autoreject_file; "" for none
	// MaxPending (max_pending_keys) caps the pending keys: a new key that
	// would be written to pending beyond it is refused with a
	// protocol.KindPendingFull error. 0: no cap.
	MaxPending int
	Log        *zap.Logger
	// OnChange, when set, is called after each change made by Accept, Reject
	// or Delete (one call per id and state left), in order, outside the
	// store's lock: what Salt announces as salt/key events. Changes made by
	// Check are reported by its Decision instead (salt/auth).
	OnChange func(Change)
}

// Decision is the outcome of Check.
type Decision struct {
	Status string // protocol.KeyAccepted, KeyPending, KeyRejected or KeyDenied
	// Act is the salt/auth act: ActAccept, ActPend, ActReject or ActDenied,
	// or "" where Salt's event has none (a key already rejected; a key
	// that differs from the pending one of an auto-signed id).
	Act     string
	Changed bool // the store was changed (a key written or moved)
}

// Change is one change made by an operator's command.
type Change struct {
	ID   string
	Act  string // ActAccept, ActReject or ActDelete
	From string // state the key left (protocol.Key*)
	To   string // state the key entered; "" when deleted
	// Again: the same call already changed a key of this id (it had keys
	// in two of the states it matched); Salt announces an id once a call.
	Again bool
}

// Store is the master's key store. Its methods are safe for concurrent use.
type Store struct {
	dir        string
	opts       Options
	log        *zap.Logger
	autosign   *signingFile
	autoreject *signingFile

	mu   sync.RWMutex
	keys [numStates]map[string]ed25519.PublicKey // a nil key: a file that did not parse
	via  map[string]string                       // pending id -> the relay its key came through
	// proxied: proxy minion id -> the relay that holds its key (proxied.go)
	proxied map[string]string
	// invalid are the key files found at Open whose names are not valid
	// ids (protocol.ValidID), by directory name: listed, never loaded.
	invalid map[string][]string
}

// Open loads the key store under pkiDir, making its directories if needed.
func Open(pkiDir string, opts Options) (*Store, error) {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("keys")
	s := &Store{
		dir:        pkiDir,
		opts:       opts,
		log:        log,
		autosign:   newSigningFile(opts.AutosignFile, log),
		autoreject: newSigningFile(opts.AutorejectFile, log),
		invalid:    map[string][]string{},
	}
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, fmt.Errorf("open key store %s: %w", pkiDir, err)
	}
	for st := range numStates {
		m, err := s.load(st)
		if err != nil {
			return nil, fmt.Errorf("open key store %s: %w", pkiDir, err)
		}
		s.keys[st] = m
	}
	via, err := s.loadVia()
	if err != nil {
		return nil, fmt.Errorf("open key store %s: %w", pkiDir, err)
	}
	s.via = via
	if s.proxied, err = s.loadProxied(); err != nil {
		return nil, fmt.Errorf("open key store %s: %w", pkiDir, err)
	}
	return s, nil
}

// loadVia reads DirPendingVia. A file whose id has no pending key (left by
// a crash between moving the key and removing the file) is removed.
func (s *Store) loadVia() (map[string]string, error) {
	dir := filepath.Join(s.dir, DirPendingVia)
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
		if _, ok := s.keys[pending][name]; !ok {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				s.log.Warn("remove stale relay file", zap.String("id", name), zap.Error(err))
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		relay := strings.TrimSpace(string(b))
		if err := protocol.ValidID(relay); err != nil {
			s.log.Warn("ignore relay file with an invalid relay id", zap.String("id", name), zap.Error(err))
			continue
		}
		m[name] = relay
	}
	return m, nil
}

func (s *Store) load(st state) (map[string]ed25519.PublicKey, error) {
	dir := filepath.Join(s.dir, stateDirs[st])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string]ed25519.PublicKey, len(ents))
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			// Left over by a write that did not finish.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				s.log.Warn("remove stale temporary file", zap.String("dir", dir), zap.String("file", name), zap.Error(err))
			}
			continue
		}
		if strings.HasPrefix(name, ".") || !e.Type().IsRegular() {
			continue // as salt-key, which lists only plain, visible files
		}
		if err := protocol.ValidID(name); err != nil {
			// A key kept from before the id rule was what it is: no agent
			// can say Hello with this id, and no key match may act on it.
			// Listed (Invalid) so that the operator removes it by hand.
			s.log.Warn("key file under an invalid id: refused, listed as invalid; remove it by hand",
				zap.String("dir", dir), zap.String("file", name), zap.Error(err))
			s.invalid[stateDirs[st]] = append(s.invalid[stateDirs[st]], name)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		pub, err := protocol.ParsePublicKey(b)
		if err != nil {
			// Keep the id with no key: it still holds its state (a rejected
			// id stays rejected) and matches no key an agent presents.
			s.log.Error("corrupt public key", zap.String("dir", dir), zap.String("id", name), zap.Error(err))
			pub = nil
		}
		m[name] = pub
	}
	return m, nil
}

// AcceptedKey returns the accepted key of id. It reads memory only.
func (s *Store) AcceptedKey(id string) (ed25519.PublicKey, bool) {
	s.mu.RLock()
	pub := s.keys[accepted][id]
	s.mu.RUnlock()
	return pub, pub != nil
}

// Known reports whether id has a key in any state: a Hello for an id that
// is not known would make a new key file.
func (s *Store) Known(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for st := range numStates {
		if _, ok := s.keys[st][id]; ok {
			return true
		}
	}
	return false
}

// Invalid returns the key files found at Open whose names are not valid
// ids, by directory name, each list sorted. They are refused: Check never
// accepts them and no operation acts on them.
func (s *Store) Invalid() map[string][]string {
	out := make(map[string][]string, len(s.invalid))
	for dir, names := range s.invalid {
		names = slices.Clone(names)
		sortIDs(names)
		out[dir] = names
	}
	return out
}

// Check decides what to do with an agent that says Hello as id with the key
// pub it proved in its TLS handshake, with Salt's rules (see the package
// doc), and records the key where those rules say. via is the relay the
// Hello came through ("": a direct connection); a key left pending records
// it (see PendingVia).
func (s *Store) Check(id string, pub ed25519.PublicKey, via string) (Decision, error) {
	if err := protocol.ValidID(id); err != nil {
		return Decision{}, fmt.Errorf("check key of %q: %w", id, err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return Decision{}, fmt.Errorf("check key of %s: public key has %d bytes, want %d", id, len(pub), ed25519.PublicKeySize)
	}

	// The hot path: an accepted agent reconnecting.
	s.mu.RLock()
	_, isRejected := s.keys[rejected][id]
	acc := s.keys[accepted][id]
	s.mu.RUnlock()
	if !isRejected && acc != nil && acc.Equal(pub) {
		return Decision{Status: protocol.KeyAccepted, Act: ActAccept}, nil
	}

	// Read the signing files outside the lock.
	autoReject := s.autoreject.match(id)
	autoSign := s.opts.AutoAccept || s.autosign.match(id)

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[rejected][id]; ok {
		return Decision{Status: protocol.KeyRejected}, nil
	}
	if acc, ok := s.keys[accepted][id]; ok {
		if acc != nil && acc.Equal(pub) {
			return Decision{Status: protocol.KeyAccepted, Act: ActAccept}, nil
		}
		return s.deny(id, pub, "the public keys did not match")
	}
	if pend, ok := s.keys[pending][id]; ok {
		switch {
		case autoReject:
			if err := s.move(id, pending, rejected); err != nil {
				return Decision{}, err
			}
			s.log.Info("pending public key rejected via autoreject_file", zap.String("id", id))
			return Decision{Status: protocol.KeyRejected, Act: ActReject, Changed: true}, nil
		case pend == nil || !pend.Equal(pub):
			d, err := s.deny(id, pub, "the public key in pending did not match")
			if autoSign {
				d.Act = "" // Salt's auto-sign branch of _auth fires no act
			}
			return d, err
		case autoSign:
			if err := s.move(id, pending, accepted); err != nil {
				return Decision{}, err
			}
			s.log.Info("pending public key accepted via auto_accept or autosign_file", zap.String("id", id))
			return Decision{Status: protocol.KeyAccepted, Act: ActAccept, Changed: true}, nil
		default:
			if err := s.setVia(id, via); err != nil {
				return Decision{}, err
			}
			return Decision{Status: protocol.KeyPending, Act: ActPend}, nil
		}
	}
	to, act := pending, ActPend
	switch {
	case autoReject:
		to, act = rejected, ActReject
	case autoSign:
		to, act = accepted, ActAccept
	}
	if to == pending && s.opts.MaxPending > 0 && len(s.keys[pending]) >= s.opts.MaxPending {
		return Decision{}, protocol.Errorf(protocol.KindPendingFull,
			"%d keys are pending, as many as max_pending_keys allows; accept, reject or delete some", len(s.keys[pending]))
	}
	if err := s.write(id, to, pub); err != nil {
		return Decision{}, err
	}
	if to == pending {
		if err := s.setVia(id, via); err != nil {
			return Decision{}, err
		}
	}
	s.log.Info("new public key", zap.String("id", id), zap.String("state", stateNames[to]),
		zap.String("finger", protocol.Fingerprint(pub)), zap.String("relay", via))
	return Decision{Status: stateNames[to], Act: act, Changed: true}, nil
}

// deny records pub as the denied key of id. s.mu is held. It logs an error
// for a key it has not denied before, and only at debug level for the same
// key again, so an agent retrying with a wrong key does not flood the log.
func (s *Store) deny(id string, pub ed25519.PublicKey, why string) (Decision, error) {
	d := Decision{Status: protocol.KeyDenied, Act: ActDenied}
	fields := []zap.Field{zap.String("id", id), zap.String("finger", protocol.Fingerprint(pub))}
	if old := s.keys[denied][id]; old != nil && old.Equal(pub) {
		s.log.Debug("authentication attempt with a denied key", fields...)
		return d, nil
	}
	if err := s.write(id, denied, pub); err != nil {
		return Decision{}, err
	}
	s.log.Error("authentication attempt failed, "+why+"; this may be an attempt to compromise the fleet", fields...)
	d.Changed = true
	return d, nil
}

// List returns the ids in each state, keyed by directory name, each list
// sorted as salt-key sorts (ignoring case) and never nil.
func (s *Store) List() (map[string][]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string][]string, numStates)
	for st := range numStates {
		ids := make([]string, 0, len(s.keys[st]))
		for id := range s.keys[st] {
			ids = append(ids, id)
		}
		sortIDs(ids)
		out[stateDirs[st]] = ids
	}
	return out, nil
}

// PendingVia returns, for each pending key that came through a relay, the
// relay's id: the relay its agent came through last. Pending keys that came
// directly are not in it; a key that leaves pending leaves it too.
func (s *Store) PendingVia() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]string, len(s.via))
	for id, r := range s.via {
		out[id] = r
	}
	return out
}

// Accept moves the keys of the ids that match glob from pending (and from
// rejected and denied when asked) to accepted, replacing an accepted key of
// the same id, like salt-key -a (with --include-rejected/--include-denied).
// glob may be a comma-separated list of globs. It returns the ids accepted.
func (s *Store) Accept(glob string, includeRejected, includeDenied bool) ([]string, error) {
	from := []state{pending}
	if includeRejected {
		from = append(from, rejected)
	}
	if includeDenied {
		from = append(from, denied)
	}
	return s.moveMatching(glob, from, accepted, ActAccept)
}

// Reject moves the keys of the ids that match glob from pending (and from
// accepted and denied when asked) to rejected, like salt-key -r (with
// --include-accepted/--include-denied). It returns the ids rejected.
func (s *Store) Reject(glob string, includeAccepted, includeDenied bool) ([]string, error) {
	from := []state{pending}
	if includeAccepted {
		from = append(from, accepted)
	}
	if includeDenied {
		from = append(from, denied)
	}
	return s.moveMatching(glob, from, rejected, ActReject)
}

// Delete removes the keys of the ids that match glob, in every state, like
// salt-key -d. A deleted accepted key is no longer returned by AcceptedKey
// when Delete returns. It returns the ids deleted.
func (s *Store) Delete(glob string) ([]string, error) {
	ids, err := s.moveMatching(glob, []state{accepted, pending, rejected, denied}, numStates, ActDelete)
	s.mu.Lock()
	s.forgetProxied(ids)
	s.mu.Unlock()
	return ids, err
}

// Dict names keys exactly, as Salt's match_dict (salt/key.py Key.accept,
// reject and delete_key; the wheel's key.accept_dict): directory name
// (DirAccepted, DirPending, ...) to ids. Its ids are compared exactly,
// never as globs.
type Dict map[string][]string

// AcceptDict is Accept for the keys named in d: those listed under
// DirPending (and DirRejected, DirDenied when asked) that are still there.
func (s *Store) AcceptDict(d Dict, includeRejected, includeDenied bool) ([]string, error) {
	from := []state{pending}
	if includeRejected {
		from = append(from, rejected)
	}
	if includeDenied {
		from = append(from, denied)
	}
	return s.movePicked(d.pick, from, accepted, ActAccept)
}

// RejectDict is Reject for the keys named in d.
func (s *Store) RejectDict(d Dict, includeAccepted, includeDenied bool) ([]string, error) {
	from := []state{pending}
	if includeAccepted {
		from = append(from, accepted)
	}
	if includeDenied {
		from = append(from, denied)
	}
	return s.movePicked(d.pick, from, rejected, ActReject)
}

// DeleteDict is Delete for the keys named in d, in the states it names them.
func (s *Store) DeleteDict(d Dict) ([]string, error) {
	ids, err := s.movePicked(d.pick, []state{accepted, pending, rejected, denied}, numStates, ActDelete)
	s.mu.Lock()
	s.forgetProxied(ids)
	s.mu.Unlock()
	return ids, err
}

// EveryState returns the Dict naming ids in every state.
func EveryState(ids ...string) Dict {
	d := make(Dict, numStates)
	for _, dir := range stateDirs {
		d[dir] = ids
	}
	return d
}

// pick returns the ids d names under st's directory that m holds, sorted.
func (d Dict) pick(m map[string]ed25519.PublicKey, st state) []string {
	var ids []string
	for _, id := range d[stateDirs[st]] {
		if _, ok := m[id]; ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sortIDs(ids)
	return ids
}

// moveMatching moves (or with to == numStates, deletes) the keys in the from
// states whose ids match glob, in the order of from, as salt-key does.
func (s *Store) moveMatching(glob string, from []state, to state, act string) ([]string, error) {
	globs, err := splitGlobs(glob)
	if err != nil {
		return nil, err
	}
	return s.movePicked(func(m map[string]ed25519.PublicKey, _ state) []string { return matching(m, globs) }, from, to, act)
}

// movePicked moves (or with to == numStates, deletes) the keys that pick picks
// in each of the from states, in the order of from.
func (s *Store) movePicked(pick func(map[string]ed25519.PublicKey, state) []string, from []state, to state, act string) ([]string, error) {
	var err error
	var changes []Change
	defer func() { s.notify(changes) }()

	s.mu.Lock()
	defer s.mu.Unlock()
	done := []string{}
	for _, st := range from {
		for _, id := range pick(s.keys[st], st) {
			c := Change{ID: id, Act: act, From: stateNames[st], Again: slices.Contains(done, id)}
			if to == numStates {
				err = s.remove(id, st)
			} else {
				c.To = stateNames[to]
				err = s.move(id, st, to)
			}
			if err != nil {
				return done, err
			}
			s.log.Info("key "+act, zap.String("id", id), zap.String("from", c.From), zap.String("to", c.To))
			changes = append(changes, c)
			if !slices.Contains(done, id) {
				done = append(done, id)
			}
		}
	}
	sortIDs(done)
	return done, nil
}

func (s *Store) notify(changes []Change) {
	if s.opts.OnChange == nil {
		return
	}
	for _, c := range changes {
		s.opts.OnChange(c)
	}
}

// Finger returns the fingerprints of the keys whose ids match glob, by
// directory name and id, like salt-key -f. States with no match are left
// out; a key file that did not parse has an empty fingerprint.
func (s *Store) Finger(glob string) (map[string]map[string]string, error) {
	return s.describe(glob, protocol.Fingerprint)
}

// PEM returns the public keys (PEM) whose ids match glob, by directory
// name and id, like salt-key -p (Key.key_str in salt/key.py). States with
// no match are left out; a key file that did not parse is empty.
func (s *Store) PEM(glob string) (map[string]map[string]string, error) {
	return s.describe(glob, func(pub ed25519.PublicKey) string { return string(protocol.EncodePublicKey(pub)) })
}

func (s *Store) describe(glob string, show func(ed25519.PublicKey) string) (map[string]map[string]string, error) {
	globs, err := splitGlobs(glob)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]map[string]string{}
	for st := range numStates {
		for _, id := range matching(s.keys[st], globs) {
			m := out[stateDirs[st]]
			if m == nil {
				m = map[string]string{}
				out[stateDirs[st]] = m
			}
			fp := ""
			if pub := s.keys[st][id]; pub != nil {
				fp = show(pub)
			}
			m[id] = fp
		}
	}
	return out, nil
}

// Matches reports whether id matches Salt's key match expression: a glob
// or comma-separated globs (salt/key.py Key.name_match), as Accept, Reject,
// Delete and Finger read it. An empty expression matches nothing.
func Matches(expr, id string) bool {
	globs, err := splitGlobs(expr)
	return err == nil && len(matching(map[string]ed25519.PublicKey{id: nil}, globs)) == 1
}

// splitGlobs splits salt-key's comma-separated match expression.
func splitGlobs(glob string) ([]string, error) {
	var out []string
	for g := range strings.SplitSeq(glob, ",") {
		if g = strings.TrimSpace(g); g != "" {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("empty key match expression")
	}
	return out, nil
}

func matching(m map[string]ed25519.PublicKey, globs []string) []string {
	var ids []string
	for id := range m {
		for _, g := range globs {
			if targets.MatchGlob(g, id) {
				ids = append(ids, id)
				break
			}
		}
	}
	sortIDs(ids)
	return ids
}

// sortIDs sorts as Salt's sorted_ignorecase, with byte order breaking ties.
func sortIDs(ids []string) {
	slices.SortFunc(ids, func(a, b string) int {
		if c := strings.Compare(strings.ToLower(a), strings.ToLower(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// Disk operations. s.mu is held for writing; memory changes only after the
// disk did.

func (s *Store) path(id string, st state) string {
	return filepath.Join(s.dir, stateDirs[st], id)
}

func (s *Store) write(id string, st state, pub ed25519.PublicKey) error {
	if err := writeAtomic(s.path(id, st), protocol.EncodePublicKey(pub)); err != nil {
		return fmt.Errorf("write key %s: %w", id, err)
	}
	s.keys[st][id] = pub
	return nil
}

func (s *Store) move(id string, from, to state) error {
	if err := os.Rename(s.path(id, from), s.path(id, to)); err != nil {
		return fmt.Errorf("move key %s to %s: %w", id, stateDirs[to], err)
	}
	if err := syncDir(filepath.Join(s.dir, stateDirs[to])); err != nil {
		return fmt.Errorf("move key %s to %s: %w", id, stateDirs[to], err)
	}
	if err := syncDir(filepath.Join(s.dir, stateDirs[from])); err != nil {
		return fmt.Errorf("move key %s to %s: %w", id, stateDirs[to], err)
	}
	s.keys[to][id] = s.keys[from][id]
	delete(s.keys[from], id)
	if from == pending {
		s.clearVia(id)
	}
	return nil
}

func (s *Store) remove(id string, st state) error {
	// Forget it first: a deleted accepted key must stop working even if the
	// disk fails us.
	delete(s.keys[st], id)
	if st == pending {
		s.clearVia(id)
	}
	if err := os.Remove(s.path(id, st)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete key %s: %w", id, err)
	}
	if err := syncDir(filepath.Join(s.dir, stateDirs[st])); err != nil {
		return fmt.Errorf("delete key %s: %w", id, err)
	}
	return nil
}

// setVia records (or, with via "", forgets) the relay the pending key of id
// came through, if that changed.
func (s *Store) setVia(id, via string) error {
	if s.via[id] == via {
		return nil
	}
	if via == "" {
		s.clearVia(id)
		return nil
	}
	if err := writeAtomic(filepath.Join(s.dir, DirPendingVia, id), []byte(via+"\n")); err != nil {
		return fmt.Errorf("write relay of key %s: %w", id, err)
	}
	s.via[id] = via
	return nil
}

// clearVia forgets the relay of id's pending key. Failing to remove its
// file only costs a warning: Open removes a file whose key is not pending.
func (s *Store) clearVia(id string) {
	if _, ok := s.via[id]; !ok {
		return
	}
	delete(s.via, id)
	dir := filepath.Join(s.dir, DirPendingVia)
	err := os.Remove(filepath.Join(dir, id))
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove relay file", zap.String("id", id), zap.Error(err))
	}
}

func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
