package master

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

func globOrEqual(pattern, s string) bool { return targets.MatchGlob(pattern, s) }

// keyMatch reads the match argument of the key functions that take Salt's
// match expression (salt/key.py Key.name_match): a glob, comma-separated
// globs, or a list of globs. A list item holding ',' is refused: Salt reads
// it as one glob, which no id (they hold no ',') can match, and joined
// here it would be read as two.
func (a *args) keyMatch() (string, error) {
	v, ok := a.get(0, "match")
	if !ok {
		return "", badRequest("%s: missing required argument %q", a.req.Fun, "match")
	}
	switch v := v.(type) {
	case string:
		return v, nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, it := range v {
			s, ok := it.(string)
			if !ok || s == "" || strings.Contains(s, ",") {
				return "", badRequest("%s: each item of a match list must be one glob, got %v", a.req.Fun, it)
			}
			parts = append(parts, s)
		}
		if len(parts) == 0 {
			return "", badRequest("%s: empty match list", a.req.Fun)
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", badRequest("%s: match must be a glob or a list of globs, got a dictionary (see %s_dict)", a.req.Fun, a.req.Fun)
	}
	return fmt.Sprint(v), nil
}

// keyDict reads the match argument of the _dict key functions: Salt's
// match_dict, key state directory to a list of exact ids.
func (a *args) keyDict() (keys.Dict, error) {
	v, ok := a.get(0, "match")
	if !ok {
		return nil, badRequest("%s: missing required argument %q", a.req.Fun, "match")
	}
	in, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("%s: match must be a dictionary of key state to ids, got %T", a.req.Fun, v)
	}
	d := make(keys.Dict, len(in))
	for state, ids := range in {
		switch state {
		case keys.DirAccepted, keys.DirPending, keys.DirRejected, keys.DirDenied:
		default:
			return nil, badRequest("%s: unknown key state %q (minions, minions_pre, minions_rejected or minions_denied)", a.req.Fun, state)
		}
		l, ok := ids.([]any)
		if !ok {
			return nil, badRequest("%s: %s must be a list of ids, got %T", a.req.Fun, state, ids)
		}
		for _, id := range l {
			s, ok := id.(string)
			if !ok {
				return nil, badRequest("%s: %s: ids must be strings, got %T", a.req.Fun, state, id)
			}
			d[state] = append(d[state], s)
		}
	}
	return d, nil
}

// wheel are the master's wheel functions, by name: key management as
// Salt's wheel key module.
func (m *Master) wheel() map[string]callFunc {
	return map[string]callFunc{
		"key.list_all":    m.wheelListAll,
		"key.list":        m.wheelList,
		"key.accept":      m.wheelAccept,
		"key.accept_dict": m.wheelAcceptDict,
		"key.reject":      m.wheelReject,
		"key.reject_dict": m.wheelRejectDict,
		"key.delete":      m.wheelDelete,
		"key.delete_dict": m.wheelDeleteDict,
		"key.finger":      m.wheelFinger,
		"key.print":       m.wheelPrint,
		"key.gen":         m.wheelGen,
		"key.gen_accept":  m.wheelGenAccept,
		"key.finger_master": func(context.Context, *api.Request) (any, error) {
			return map[string]any{"local": map[string]any{"master.pub": m.Fingerprint()}}, nil
		},
	}
}

func (m *Master) runWheel(ctx context.Context, req *api.Request) (any, error) {
	fn, ok := m.wheel()[req.Fun]
	if !ok {
		return nil, badRequest("'%s' is not available.", req.Fun)
	}
	return fn(ctx, req)
}

func (m *Master) wheelListAll(context.Context, *api.Request) (any, error) {
	all, err := m.keys.List()
	if err != nil {
		return nil, err
	}
	return m.withInvalid(m.withRelays(stringLists(all), all[keys.DirPending])), nil
}

// withInvalid adds to a key listing, under keys.InvalidKey, the key files
// whose names are not valid ids (keys.Store.Invalid), if there are any.
func (m *Master) withInvalid(out map[string]any) map[string]any {
	if inv := m.keys.Invalid(); len(inv) > 0 {
		l := make(map[string]any, len(inv))
		for dir, names := range inv {
			l[dir] = toAnyList(names)
		}
		out[keys.InvalidKey] = l
	}
	return out
}

// withRelays adds to a key listing, under keys.RelaysKey, the relay each
// of the pending ids came through, if any did: Salt's four keys keep
// their shape, and a consumer that does not know this one is unaffected.
func (m *Master) withRelays(out map[string]any, pendingIDs []string) map[string]any {
	via := m.keys.PendingVia()
	relays := map[string]any{}
	for _, id := range pendingIDs {
		if r, ok := via[id]; ok {
			relays[id] = r
		}
	}
	if len(relays) > 0 {
		out[keys.RelaysKey] = relays
	}
	return out
}

// withProxied adds to a key listing, under keys.ProxiedKey, the relay of
// each listed id that is a proxy minion, if any is.
func (m *Master) withProxied(out map[string]any) map[string]any {
	px := m.keys.Proxied()
	if len(px) == 0 {
		return out
	}
	listed := map[string]any{}
	for _, dir := range []string{keys.DirAccepted, keys.DirPending, keys.DirRejected, keys.DirDenied} {
		ids, _ := out[dir].([]any)
		for _, id := range ids {
			if r, ok := px[fmt.Sprint(id)]; ok {
				listed[fmt.Sprint(id)] = r
			}
		}
	}
	if len(listed) > 0 {
		out[keys.ProxiedKey] = listed
	}
	return out
}

// keyStates maps salt-key's state names and abbreviations to the store's.
var keyStates = map[string]string{
	"acc": "minions", "accepted": "minions",
	"pre": "minions_pre", "un": "minions_pre", "unaccepted": "minions_pre", "pending": "minions_pre",
	"rej": "minions_rejected", "rejected": "minions_rejected",
	"den": "minions_denied", "denied": "minions_denied",
}

func (m *Master) wheelList(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	state, err := a.str(0, "match", true)
	if err != nil {
		return nil, err
	}
	all, err := m.keys.List()
	if err != nil {
		return nil, err
	}
	if state == "all" {
		return m.withProxied(m.withInvalid(m.withRelays(stringLists(all), all[keys.DirPending]))), nil
	}
	k, ok := keyStates[strings.ToLower(state)]
	if !ok {
		return nil, badRequest("key.list: unknown key state %q (accepted, pending, rejected, denied or all)", state)
	}
	out := map[string]any{k: toAnyList(all[k])}
	if k == keys.DirPending {
		m.withRelays(out, all[k])
	}
	return m.withProxied(out), nil
}

func (m *Master) wheelAccept(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	match, err := a.keyMatch()
	if err != nil {
		return nil, err
	}
	inclRej, inclDen, err := a.includeFlags("include_rejected", "include_denied")
	if err != nil {
		return nil, err
	}
	ids, err := m.keys.Accept(match, inclRej, inclDen)
	if err != nil {
		return nil, err
	}
	m.accepted(ids)
	return map[string]any{"minions": toAnyList(ids)}, nil
}

// keyChanged is the key store's OnChange: the salt/key event, then the
// agents held on that id (keywait.go) are told. In that order: a held agent
// that is accepted connects at once and its salt/minion/<id>/start must not
// come before the salt/key that let it in (it did, now and then, when the
// wheel published salt/key after the store had returned).
func (m *Master) keyChanged(c keys.Change) {
	if !c.Again {
		m.bus.Publish(event.TagKey, map[string]any{"id": c.ID, "act": c.Act, "result": true})
	}
	m.keyWait.changed(c)
}

// accepted, rejected and deleted act on ids whose keys a wheel call changed
// (their salt/key events went out from keyChanged).
func (m *Master) accepted(ids []string) {
	for _, id := range ids {
		m.dropMinion(id, "accepted key replaced")
	}
}

func (m *Master) wheelReject(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	match, err := a.keyMatch()
	if err != nil {
		return nil, err
	}
	inclAcc, inclDen, err := a.includeFlags("include_accepted", "include_denied")
	if err != nil {
		return nil, err
	}
	ids, err := m.keys.Reject(match, inclAcc, inclDen)
	if err != nil {
		return nil, err
	}
	m.rejected(ids)
	return map[string]any{"minions_rejected": toAnyList(ids)}, nil
}

func (m *Master) rejected(ids []string) {
	for _, id := range ids {
		m.dropMinion(id, "key rejected")
	}
}

func (m *Master) wheelDelete(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	match, err := a.keyMatch()
	if err != nil {
		return nil, err
	}
	ids, err := m.deleteKeys(match)
	if err != nil {
		return nil, err
	}
	return map[string]any{"minions": toAnyList(ids)}, nil
}

// wheelAcceptDict is Salt's key.accept_dict: accept exactly the keys named,
// as salt-key does with the keys it showed before asking.
func (m *Master) wheelAcceptDict(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	d, err := a.keyDict()
	if err != nil {
		return nil, err
	}
	inclRej, inclDen, err := a.includeFlags("include_rejected", "include_denied")
	if err != nil {
		return nil, err
	}
	ids, err := m.keys.AcceptDict(d, inclRej, inclDen)
	if err != nil {
		return nil, err
	}
	m.accepted(ids)
	return map[string]any{"minions": toAnyList(ids)}, nil
}

// wheelRejectDict is Salt's key.reject_dict.
func (m *Master) wheelRejectDict(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	d, err := a.keyDict()
	if err != nil {
		return nil, err
	}
	inclAcc, inclDen, err := a.includeFlags("include_accepted", "include_denied")
	if err != nil {
		return nil, err
	}
	ids, err := m.keys.RejectDict(d, inclAcc, inclDen)
	if err != nil {
		return nil, err
	}
	m.rejected(ids)
	return map[string]any{"minions_rejected": toAnyList(ids)}, nil
}

// wheelDeleteDict is Salt's key.delete_dict.
func (m *Master) wheelDeleteDict(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	d, err := a.keyDict()
	if err != nil {
		return nil, err
	}
	ids, err := m.keys.DeleteDict(d)
	m.deleted(ids)
	if err != nil {
		return nil, err
	}
	return map[string]any{"minions": toAnyList(ids)}, nil
}

// deleteKeys deletes the keys whose ids match Salt's match expression.
func (m *Master) deleteKeys(match string) ([]string, error) {
	ids, err := m.keys.Delete(match)
	if err != nil {
		return nil, err
	}
	m.deleted(ids)
	return ids, nil
}

// deleteKey deletes the keys of exactly id, in every state.
func (m *Master) deleteKey(id string) error {
	ids, err := m.keys.DeleteDict(keys.EveryState(id))
	m.deleted(ids)
	return err
}

func (m *Master) deleted(ids []string) {
	for _, id := range ids {
		m.dropMinion(id, "key deleted")
		m.minions.forget(id)
		m.pillar.Forget(id)
	}
}

// dropMinion closes a minion's connection when the key it connected with
// is no longer its accepted key.
func (m *Master) dropMinion(id, why string) {
	s := m.minions.session(id)
	if s == nil {
		return
	}
	if pub, ok := m.keys.AcceptedKey(id); ok && pub.Equal(s.pub) {
		return
	}
	s.close(protocol.KindNotAccepted, why)
}

func (m *Master) wheelFinger(_ context.Context, req *api.Request) (any, error) {
	return m.wheelDescribe(req, "key.finger", m.keys.Finger)
}

// wheelPrint is Salt's key.print (key_str): the public keys matching a
// glob, by state.
func (m *Master) wheelPrint(_ context.Context, req *api.Request) (any, error) {
	return m.wheelDescribe(req, "key.print", m.keys.PEM)
}

func (m *Master) wheelDescribe(req *api.Request, fun string, describe func(string) (map[string]map[string]string, error)) (any, error) {
	a := &args{req: req}
	match, err := a.keyMatch()
	if err != nil {
		return nil, err
	}
	f, err := describe(match)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fun, err)
	}
	out := make(map[string]any, len(f))
	for state, ids := range f {
		mm := make(map[string]any, len(ids))
		for id, fp := range ids {
			mm[id] = fp
		}
		out[state] = mm
	}
	pre := make([]string, 0, len(f[keys.DirPending]))
	for id := range f[keys.DirPending] {
		pre = append(pre, id)
	}
	return m.withRelays(out, pre), nil
}

func toAnyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func stringLists(all map[string][]string) map[string]any {
	out := make(map[string]any, len(all))
	for k, v := range all {
		out[k] = toAnyList(v)
	}
	return out
}

// wheelGen makes a new agent key pair and returns it (Salt's key.gen):
// {"pub": PEM, "priv": PEM}. The master keeps nothing.
func (m *Master) wheelGen(context.Context, *api.Request) (any, error) {
	id, err := protocol.GenerateIdentity()
	if err != nil {
		return nil, fmt.Errorf("key.gen: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(id.Priv)
	if err != nil {
		return nil, fmt.Errorf("key.gen: %w", err)
	}
	return map[string]any{
		"pub":  string(protocol.EncodePublicKey(id.Pub)),
		"priv": string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
	}, nil
}

// wheelGenAccept makes a key pair for agent id_, accepts its public key and
// returns the pair (Salt's key.gen_accept id_ [force=False]). Without
// force, an id that already has a key gets {} and nothing changes.
func (m *Master) wheelGenAccept(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	id, err := a.str(0, "id_", false)
	if err != nil {
		return nil, err
	}
	if id == "" {
		if id, err = a.str(-1, "id", true); err != nil {
			return nil, err
		}
	}
	if err := protocol.ValidID(id); err != nil {
		return nil, badRequest("key.gen_accept: %q is not a valid agent id", id)
	}
	force, err := a.boolean(2, "force")
	if err != nil {
		return nil, err
	}
	all, err := m.keys.List()
	if err != nil {
		return nil, err
	}
	for _, ids := range all {
		for _, have := range ids {
			if have != id {
				continue
			}
			if !force {
				return map[string]any{}, nil
			}
			if err := m.deleteKey(id); err != nil {
				return nil, err
			}
		}
	}
	pair, err := m.wheelGen(ctx, req)
	if err != nil {
		return nil, err
	}
	pub, err := protocol.ParsePublicKey([]byte(pair.(map[string]any)["pub"].(string)))
	if err != nil {
		return nil, fmt.Errorf("key.gen_accept: %w", err)
	}
	if _, err := m.keys.Check(id, pub, ""); err != nil {
		return nil, fmt.Errorf("key.gen_accept: %w", err)
	}
	if _, err := m.keys.AcceptDict(keys.Dict{keys.DirPending: {id}}, false, false); err != nil {
		return nil, fmt.Errorf("key.gen_accept: %w", err)
	}
	if pk, ok := m.keys.AcceptedKey(id); !ok || !pk.Equal(pub) {
		return nil, fmt.Errorf("key.gen_accept: the key of %s was not accepted", id)
	}
	return pair, nil
}

// includeFlags reads the two include_* flags that follow the match of
// Salt's key.accept and key.reject (and their _dict forms): positions 1
// and 2, or by name.
func (a *args) includeFlags(first, second string) (bool, bool, error) {
	x, err := a.boolean(1, first)
	if err != nil {
		return false, false, err
	}
	y, err := a.boolean(2, second)
	return x, y, err
}
