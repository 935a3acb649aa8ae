package master

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// An agent's pillar (PillarGet, capability 12): the agent asks on its own
// session, at session start and on saltutil.refresh_pillar, and the master
// answers with the pillar of that session's id (never an id taken from the
// message), sealed to the key the key store accepted for that id
// (protocol.SealTo, purpose "pillar", the request's nonce as additional
// data). A relay forwards the box and cannot open it.

// pillarTimeout bounds one device's pillar compile for a PillarGet.
const pillarTimeout = time.Minute

// maxPillarCalls bounds the PillarGet answers being made at once; more
// wait. One device has one at a time.
const maxPillarCalls = 8

var (
	pillarCallSlots = make(chan struct{}, maxPillarCalls)
	pillarCalling   sync.Map // *session -> struct{}: an answer is being made for it
)

// answerPillarGet answers s's PillarGet in the background (a pillar
// compile may take a while; the session's reader goes on).
func (m *Master) answerPillarGet(s *session, g *protocol.PillarGet) {
	if _, busy := pillarCalling.LoadOrStore(s, struct{}{}); busy {
		m.sendPillarData(s, &protocol.PillarData{Req: g.Req, Err: "a pillar request of " + s.id + " is already being answered"})
		return
	}
	m.connWG.Add(1)
	go func() {
		defer m.connWG.Done()
		defer pillarCalling.Delete(s)
		select {
		case pillarCallSlots <- struct{}{}:
		case <-s.done:
			return
		case <-m.closing:
			return
		}
		defer func() { <-pillarCallSlots }()
		ctx, cancel := context.WithTimeout(context.Background(), pillarTimeout)
		defer cancel()
		go func() {
			select {
			case <-s.done:
			case <-m.closing:
			case <-ctx.Done():
			}
			cancel()
		}()
		reply := &protocol.PillarData{Req: g.Req}
		box, err := m.sealedPillar(ctx, s, g.Nonce, g.Refresh)
		if err != nil {
			s.log.Warn("pillar not sent", zap.Error(err))
			reply.Err = err.Error()
			if len(reply.Err) > protocol.MaxPillarErr {
				reply.Err = reply.Err[:protocol.MaxPillarErr]
			}
		} else {
			reply.Sealed = box
		}
		m.sendPillarData(s, reply)
	}()
}

// sealedPillar is s's device's pillar, encoded and sealed to its accepted
// key under nonce.
// With refresh the pillar is compiled afresh (saltutil.refresh_pillar).
func (m *Master) sealedPillar(ctx context.Context, s *session, nonce []byte, refresh bool) ([]byte, error) {
	pub, err := m.sealKey(s)
	if err != nil {
		return nil, err
	}
	p := map[string]any{}
	get := m.pillarFor
	if refresh && m.pillar != nil {
		get = m.pillar.Refresh
	}
	if get != nil {
		if p, err = get(ctx, s.id); err != nil {
			return nil, fmt.Errorf("pillar of %s: %w", s.id, err)
		}
		if p == nil {
			p = map[string]any{}
		}
	}
	enc, err := protocol.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pillar of %s: %w", s.id, err)
	}
	if len(enc) > protocol.MaxPillar {
		return nil, fmt.Errorf("pillar of %s is %d bytes encoded, more than the %d a device takes", s.id, len(enc), protocol.MaxPillar)
	}
	return protocol.SealTo(pub, s.id, protocol.PurposePillar, nonce, enc)
}

// sealKey is the key to seal to for s's device: the key the key store has
// accepted for its id, which must still be the session's.
func (m *Master) sealKey(s *session) (ed25519.PublicKey, error) {
	pub, ok := m.keys.AcceptedKey(s.id)
	if !ok || !pub.Equal(s.pub) {
		return nil, fmt.Errorf("the key of %s is no longer accepted", s.id)
	}
	return pub, nil
}

func (m *Master) sendPillarData(s *session, d *protocol.PillarData) {
	b, err := protocol.Encode(d)
	if err != nil {
		s.log.Warn("pillar answer", zap.Error(err))
		return
	}
	s.send(b)
}
