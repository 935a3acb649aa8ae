package agent

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// The device's pillar (capability 12): the agent asks its master for it
// (PillarGet, with a fresh nonce) when a session starts and on
// saltutil.refresh_pillar; the master answers with it sealed to this
// device's identity key (PillarData), which only this agent opens. It is
// kept in memory only, never written to disk, and read by the pillar.*
// functions and config.get. A box that does not open (altered on the way,
// for another device, an old one replayed) is refused and logged, and the
// pillar kept is unchanged.

// pillarGetTimeout bounds the wait for the master's answer.
const pillarGetTimeout = 90 * time.Second

// Salt's pillar refresh events (salt/modules/saltutil.py refresh_pillar
// fires "pillar_refresh" on the minion's bus; salt/minion.py
// Minion.pillar_refresh fires MINION_PILLAR_REFRESH_COMPLETE of
// salt/defaults/events.py when it is done).
const (
	tagPillarRefresh         = "pillar_refresh"
	tagPillarRefreshComplete = "/salt/minion/minion_pillar_refresh_complete"
)

// pillarState is the agent's pillar and its requests.
type pillarState struct {
	mu      sync.Mutex
	ctx     context.Context // Run's: refreshes end with it
	data    map[string]any
	next    uint64
	waiting map[uint64]chan *protocol.PillarData
}

// Pillar is the agent's pillar as last received (empty before): the map
// is shared, callers do not change it.
func (a *Agent) Pillar() map[string]any {
	a.pillar.mu.Lock()
	defer a.pillar.mu.Unlock()
	if a.pillar.data == nil {
		return map[string]any{}
	}
	return a.pillar.data
}

// pillarReply hands a PillarData to the request waiting for it.
func (a *Agent) pillarReply(d *protocol.PillarData) {
	a.pillar.mu.Lock()
	ch, ok := a.pillar.waiting[d.Req]
	delete(a.pillar.waiting, d.Req)
	a.pillar.mu.Unlock()
	if !ok {
		a.log.Debug("pillar nobody waits for; dropped", zap.Uint64("req", d.Req))
		return
	}
	ch <- d
}

// pillarLink is a connected link whose master answers PillarGet.
func (a *Agent) pillarLink() (*link, error) {
	a.mine.mu.Lock()
	defer a.mine.mu.Unlock()
	for _, k := range a.links {
		if a.mine.caps[k.out] >= protocol.CapPillar {
			return k, nil
		}
	}
	if a.nconn.Load() == 0 {
		return nil, fmt.Errorf("no master connected")
	}
	return nil, fmt.Errorf("the master (or its relay) is too old to send pillar (capability %d wanted)", protocol.CapPillar)
}

// fetchPillar asks the master behind l for this device's pillar and keeps
// it.
// refresh asks the master to compile it afresh (PillarGet.Refresh).
func (a *Agent) fetchPillar(ctx context.Context, l *link, refresh bool) error {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	ch := make(chan *protocol.PillarData, 1)
	a.pillar.mu.Lock()
	if a.pillar.waiting == nil {
		a.pillar.waiting = make(map[uint64]chan *protocol.PillarData)
	}
	a.pillar.next++
	req := a.pillar.next
	a.pillar.waiting[req] = ch
	a.pillar.mu.Unlock()
	defer func() {
		a.pillar.mu.Lock()
		delete(a.pillar.waiting, req)
		a.pillar.mu.Unlock()
	}()
	l.out.push(&protocol.PillarGet{Req: req, Nonce: nonce, Refresh: refresh})
	t := time.NewTimer(pillarGetTimeout)
	defer t.Stop()
	var d *protocol.PillarData
	select {
	case d = <-ch:
	case <-t.C:
		return fmt.Errorf("no pillar from the master within %s", pillarGetTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if d.Err != "" {
		return fmt.Errorf("the master sent no pillar: %s", d.Err)
	}
	p, err := a.openPillar(d.Sealed, nonce)
	if err != nil {
		a.log.Warn("refusing the pillar the master sent; the pillar kept is unchanged", zap.Error(err))
		return err
	}
	a.pillar.mu.Lock()
	a.pillar.data = p
	a.pillar.mu.Unlock()
	a.log.Debug("pillar received", zap.Int("keys", len(p)))
	return nil
}

// openPillar opens a PillarData's box, sealed to this device for the
// request whose nonce was nonce.
func (a *Agent) openPillar(box, nonce []byte) (map[string]any, error) {
	if len(box) > protocol.MaxPillar+protocol.SealOverhead {
		return nil, fmt.Errorf("pillar of %d bytes, more than %d", len(box), protocol.MaxPillar+protocol.SealOverhead)
	}
	plain, err := a.id.Open(a.cfg.ID, protocol.PurposePillar, nonce, box)
	if err != nil {
		return nil, fmt.Errorf("pillar: %w", err)
	}
	var p map[string]any
	if err := protocol.Unmarshal(plain, &p); err != nil {
		return nil, fmt.Errorf("pillar: %w", err)
	}
	if p == nil {
		p = map[string]any{}
	}
	return p, nil
}

// pillarAtStart fetches the pillar when a session with l's master starts.
func (a *Agent) pillarAtStart(ctx context.Context, l *link) {
	a.mine.mu.Lock()
	caps := a.mine.caps[l.out]
	a.mine.mu.Unlock()
	if caps < protocol.CapPillar {
		return
	}
	if err := a.fetchPillar(ctx, l, false); err != nil && ctx.Err() == nil {
		a.log.Warn("pillar not refreshed at session start", zap.Error(err))
	}
}

// RefreshPillar is saltutil.refresh_pillar: it fires "pillar_refresh" on
// the agent's bus, fetches the pillar from the master and fires
// "/salt/minion/minion_pillar_refresh_complete" ({"complete": bool}) when
// done. With wait it returns when done, or after timeout; without, at
// once. It reports whether the refresh event was fired (Salt's return).
func (a *Agent) RefreshPillar(ctx context.Context, wait bool, timeout time.Duration, cleanCache bool) bool {
	if err := a.FireLocal(tagPillarRefresh, map[string]any{"clean_cache": cleanCache}); err != nil {
		return false
	}
	done := make(chan struct{})
	a.jobWG.Add(1)
	go func() {
		defer a.jobWG.Done()
		defer close(done)
		err := fmt.Errorf("masterless")
		if !a.masterless() {
			var l *link
			if l, err = a.pillarLink(); err == nil {
				a.pillar.mu.Lock()
				rctx := a.pillar.ctx
				a.pillar.mu.Unlock()
				if rctx == nil {
					rctx = ctx
				}
				fctx, cancel := context.WithTimeout(rctx, pillarGetTimeout)
				err = a.fetchPillar(fctx, l, true)
				cancel()
			}
		} else {
			err = nil // a masterless agent's pillar is empty: nothing to fetch
		}
		if err != nil {
			a.log.Warn("pillar refresh", zap.Error(err))
		}
		a.FireLocal(tagPillarRefreshComplete, map[string]any{"complete": err == nil})
	}()
	if wait {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			a.log.Warn("pillar refresh did not complete within the timeout", zap.Duration("timeout", timeout))
		case <-ctx.Done():
		}
	}
	return true
}

// openSealed opens a sealed state job (capability 13) in place: its
// "__sealed__" and "__keys__" give way to the kwargs sealed in them
// ("__state__"), opened with this device's key. A job that is not sealed
// is left as it is. Only "__" kwargs (the master's data) are taken from
// the box.
func (a *Agent) openSealed(b *protocol.JobBody) error {
	v, ok := b.Kwarg[protocol.KwargSealed]
	if !ok {
		return nil
	}
	sealed, ok1 := v.([]byte)
	keys, ok2 := b.Kwarg[protocol.KwargKeys].(map[string]any)
	if !ok1 || !ok2 {
		return fmt.Errorf("job %s: a sealed job whose %s or %s is malformed", b.JID, protocol.KwargSealed, protocol.KwargKeys)
	}
	plain, err := a.id.OpenKwargs(a.cfg.ID, b.JID, sealed, keys)
	if err != nil {
		return err
	}
	delete(b.Kwarg, protocol.KwargSealed)
	delete(b.Kwarg, protocol.KwargKeys)
	for k, v := range plain {
		if strings.HasPrefix(k, "__") {
			b.Kwarg[k] = v
		}
	}
	return nil
}

// FreshPillar asks the master for the pillar (pillar.items), keeps it and
// returns it; a masterless agent's is the one in memory.
func (a *Agent) FreshPillar(ctx context.Context) (map[string]any, error) {
	if a.masterless() {
		return a.Pillar(), nil
	}
	l, err := a.pillarLink()
	if err != nil {
		return nil, fmt.Errorf("pillar: %w", err)
	}
	if err := a.fetchPillar(ctx, l, true); err != nil {
		return nil, fmt.Errorf("pillar: %w", err)
	}
	return a.Pillar(), nil
}
