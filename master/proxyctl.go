package master

// Runners proxy.add, proxy.remove and proxy.list: run-time proxy minions
// at a relay (relay/dynproxy.go). The master sends a protocol.ProxyCtl on
// the relay link's control stream and waits for the relay's ProxyAnswer.
// A reaction may call proxy.add with arguments taken from a device's event
// data (halite/relay/<relay>/discovery/new): the relay checks them (the
// device must be in its discovery inventory, the password only from its
// pillar's proxy: key), the master only what it knows: the relay is
// connected, of capability CapProxyAdd, and the request is well formed.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// proxyCtlTimeout bounds the wait for a relay's ProxyAnswer.
const proxyCtlTimeout = 15 * time.Second

// proxyCtlReq numbers the master's ProxyCtls.
var proxyCtlReq atomic.Uint64

// proxyWaits are a relay link's ProxyCtls waiting for their answers.
type proxyWaits struct {
	mu sync.Mutex
	m  map[uint64]chan *protocol.ProxyAnswer
}

// deliver hands a relay's ProxyAnswer to its waiting runner; an answer
// nobody waits for (late, or made up) is dropped.
func (w *proxyWaits) deliver(a *protocol.ProxyAnswer) {
	w.mu.Lock()
	ch := w.m[a.Req]
	delete(w.m, a.Req)
	w.mu.Unlock()
	if ch != nil {
		ch <- a
	}
}

func proxyRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{
		"proxy.add":    m.runProxyAdd,
		"proxy.remove": m.runProxyRemove,
		"proxy.list":   m.runProxyList,
	}
}

// proxyCtl sends c to relay id's link and returns its answer.
func (m *Master) proxyCtl(ctx context.Context, fun, relay string, c *protocol.ProxyCtl) (*protocol.ProxyAnswer, error) {
	l, err := m.relayLinkOf(ctx, relay)
	if err != nil {
		return nil, err
	}
	if l == nil {
		return nil, badRequest("%s: relay %q is not connected", fun, relay)
	}
	if l.caps < protocol.CapProxyAdd {
		return nil, badRequest("%s: relay %s is of capability %d: run-time proxy minions need capability %d: upgrade the relay",
			fun, relay, l.caps, protocol.CapProxyAdd)
	}
	c.Req = proxyCtlReq.Add(1)
	b, err := protocol.Encode(c)
	if err != nil {
		return nil, badRequest("%s: %v", fun, err)
	}
	if len(b) > 64<<10 {
		return nil, badRequest("%s: the request is %d bytes, more than 64 KiB", fun, len(b))
	}
	ch := make(chan *protocol.ProxyAnswer, 1)
	l.waits.mu.Lock()
	if l.waits.m == nil {
		l.waits.m = make(map[uint64]chan *protocol.ProxyAnswer)
	}
	l.waits.m[c.Req] = ch
	l.waits.mu.Unlock()
	defer func() {
		l.waits.mu.Lock()
		delete(l.waits.m, c.Req)
		l.waits.mu.Unlock()
	}()
	if !l.ctrl.send(b) {
		return nil, fmt.Errorf("%s: relay %s: the link ended", fun, relay)
	}
	t := time.NewTimer(proxyCtlTimeout)
	defer t.Stop()
	select {
	case a := <-ch:
		if a.Err != "" {
			return nil, badRequest("%s: relay %s refused: %s", fun, relay, a.Err)
		}
		return a, nil
	case <-l.ctrl.done:
		return nil, fmt.Errorf("%s: relay %s: the link ended before it answered", fun, relay)
	case <-t.C:
		return nil, fmt.Errorf("%s: relay %s did not answer within %s", fun, relay, proxyCtlTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// relayWait is how long proxyCtl waits for the link of a relay that
// relay_allow names and that is not connected now: the relay's events
// (discovery/new, which a reaction turns into proxy.add) come on its
// agent session, which may be up a moment before its link.
const relayWait = 10 * time.Second

// relayLinkOf returns relay's link; nil when it is not connected (after
// waiting up to relayWait for a relay that relay_allow names).
func (m *Master) relayLinkOf(ctx context.Context, relay string) (*relayLink, error) {
	deadline := time.Now().Add(relayWait)
	for {
		m.relays.mu.RLock()
		l := m.relays.links[relay]
		m.relays.mu.RUnlock()
		if l != nil || !m.relayAllowed(relay) || time.Now().After(deadline) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runProxyAdd is proxy.add relay=R id=ID proxytype=T mac=MAC|ip=IP
// [username= password_pillar= port= url= health_path= timeout=
// accept_new_host_key= grains=].
func (m *Master) runProxyAdd(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	relay, err := a.str(-1, "relay", true)
	if err != nil {
		return nil, err
	}
	id, err := a.str(-1, "id", true)
	if err != nil {
		return nil, err
	}
	if err := protocol.ValidID(id); err != nil {
		return nil, badRequest("proxy.add: %v", err)
	}
	entry := map[string]any{}
	for k, v := range req.Kwarg {
		switch {
		case k == "relay" || k == "id" || strings.HasPrefix(k, "__"):
		case len(entry) >= protocol.MaxProxyCtlOptions:
			return nil, badRequest("proxy.add: more than %d options", protocol.MaxProxyCtlOptions)
		default:
			entry[k] = v
		}
	}
	if len(req.Arg) > 0 {
		return nil, badRequest("proxy.add: takes keyword arguments only (relay=, id=, proxytype=, mac= or ip=, ...)")
	}
	ans, err := m.proxyCtl(ctx, "proxy.add", relay, &protocol.ProxyCtl{Op: "add", ID: id, Entry: entry})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"relay": relay}
	if len(ans.Proxies) > 0 {
		for k, v := range ans.Proxies[0] {
			out[k] = v
		}
	}
	return out, nil
}

// runProxyRemove is proxy.remove relay=R id=ID.
func (m *Master) runProxyRemove(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	relay, err := a.str(0, "relay", true)
	if err != nil {
		return nil, err
	}
	id, err := a.str(1, "id", true)
	if err != nil {
		return nil, err
	}
	if err := protocol.ValidID(id); err != nil {
		return nil, badRequest("proxy.remove: %v", err)
	}
	if _, err := m.proxyCtl(ctx, "proxy.remove", relay, &protocol.ProxyCtl{Op: "remove", ID: id}); err != nil {
		return nil, err
	}
	return map[string]any{"relay": relay, "id": id, "removed": true}, nil
}

// runProxyList is proxy.list [relay=GLOB]: each connected relay's proxy
// minions (the config's and the run-time ones), by relay.
func (m *Master) runProxyList(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	glob, err := a.str(0, "relay", false)
	if err != nil {
		return nil, err
	}
	m.relays.mu.RLock()
	var ids []string
	for id, l := range m.relays.links {
		if (glob == "" || targets.MatchGlob(glob, id)) && l.caps >= protocol.CapProxyAdd {
			ids = append(ids, id)
		}
	}
	m.relays.mu.RUnlock()
	sort.Strings(ids)
	out := map[string]any{}
	for _, id := range ids {
		ans, err := m.proxyCtl(ctx, "proxy.list", id, &protocol.ProxyCtl{Op: "list"})
		if err != nil {
			out[id] = err.Error()
			continue
		}
		l := make([]any, 0, len(ans.Proxies))
		for _, p := range ans.Proxies {
			l = append(l, p)
		}
		out[id] = l
	}
	return out, nil
}
