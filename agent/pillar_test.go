package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// lastPillarGet is the PillarGet the agent queued last.
func lastPillarGet(a *Agent) *protocol.PillarGet {
	a.out.mu.Lock()
	defer a.out.mu.Unlock()
	for i := len(a.out.q) - 1; i >= 0; i-- {
		if g, ok := a.out.q[i].(*protocol.PillarGet); ok {
			return g
		}
	}
	return nil
}

// TestPillarFromMaster: the agent keeps the pillar sealed to it for its
// request; a garbled, oversized, replayed or foreign box is refused
// (logged), the pillar kept is unchanged, and nothing crashes.
func TestPillarFromMaster(t *testing.T) {
	a := newTestAgent(t, "cam1", nil, func(c *config.Agent) { c.Master = []string{"127.0.0.1:1"} })
	defer a.jobs.close()
	l := a.links[0]
	other := newTestAgent(t, "cam2", nil, nil)
	defer other.jobs.close()

	// answer runs fetchPillar and answers its request with box(nonce).
	answer := func(box func(nonce []byte) []byte) error {
		errc := make(chan error, 1)
		go func() { errc <- a.fetchPillar(context.Background(), l, false) }()
		var g *protocol.PillarGet
		waitFor(t, "a PillarGet", func() bool {
			g = lastPillarGet(a)
			a.pillar.mu.Lock()
			next := a.pillar.next
			_, waiting := a.pillar.waiting[next]
			a.pillar.mu.Unlock()
			return g != nil && g.Req == next && waiting
		})
		a.pillarReply(&protocol.PillarData{Req: g.Req, Sealed: box(g.Nonce)})
		return <-errc
	}
	seal := func(pub []byte, id string, nonce []byte, p map[string]any) []byte {
		enc, err := protocol.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		box, err := protocol.SealTo(pub, id, protocol.PurposePillar, nonce, enc)
		if err != nil {
			t.Fatal(err)
		}
		return box
	}
	good := map[string]any{"secret": "MARKER"}
	if err := answer(func(n []byte) []byte { return seal(a.id.Pub, "cam1", n, good) }); err != nil {
		t.Fatal(err)
	}
	if a.Pillar()["secret"] != "MARKER" {
		t.Fatalf("pillar %v", a.Pillar())
	}
	var old []byte
	for name, box := range map[string]func([]byte) []byte{
		"garbled": func(n []byte) []byte {
			b := seal(a.id.Pub, "cam1", n, map[string]any{"secret": "EVIL"})
			b[len(b)/2] ^= 1
			return b
		},
		"for another device": func(n []byte) []byte { return seal(other.id.Pub, "cam2", n, map[string]any{"secret": "EVIL"}) },
		"under another id":   func(n []byte) []byte { return seal(a.id.Pub, "cam2", n, map[string]any{"secret": "EVIL"}) },
		"for another request (replayed)": func(n []byte) []byte {
			if old == nil {
				old = seal(a.id.Pub, "cam1", bytes.Repeat([]byte{1}, 16), map[string]any{"secret": "EVIL"})
			}
			return old
		},
		"oversized": func([]byte) []byte { return make([]byte, protocol.MaxPillar+protocol.SealOverhead+1) },
		"short":     func([]byte) []byte { return []byte{1, 2, 3} },
		"not a map": func(n []byte) []byte {
			b, _ := protocol.SealTo(a.id.Pub, "cam1", protocol.PurposePillar, n, []byte{0x01})
			return b
		},
	} {
		if err := answer(box); err == nil {
			t.Errorf("%s: taken", name)
		}
		if a.Pillar()["secret"] != "MARKER" {
			t.Errorf("%s: the pillar changed to %v", name, a.Pillar())
		}
	}
	// An error answer is an error; the pillar stays.
	errc := make(chan error, 1)
	go func() { errc <- a.fetchPillar(context.Background(), l, false) }()
	waitFor(t, "a PillarGet", func() bool {
		a.pillar.mu.Lock()
		defer a.pillar.mu.Unlock()
		_, ok := a.pillar.waiting[a.pillar.next]
		return ok
	})
	a.pillarReply(&protocol.PillarData{Req: a.pillar.next, Err: "render error"})
	if err := <-errc; err == nil || a.Pillar()["secret"] != "MARKER" {
		t.Errorf("error answer: %v, pillar %v", err, a.Pillar())
	}
}

// TestOpenSealedJob: a sealed state job opens with this device's key into
// __state__; one altered, or sealed to another device only, is refused.
func TestOpenSealedJob(t *testing.T) {
	a := newTestAgent(t, "cam1", nil, nil)
	defer a.jobs.close()
	other := newTestAgent(t, "cam2", nil, nil)
	defer other.jobs.close()
	st := map[string]any{"low": []any{map[string]any{"contents": "MARKER"}}}
	mk := func(to map[string][]byte) *protocol.JobBody {
		keys := map[string]ed25519.PublicKey{}
		for id, pub := range to {
			keys[id] = pub
		}
		sealed, boxes, err := protocol.SealKwargs("20260101000000000001", map[string]any{"__state__": st, "not_master_data": 1}, keys)
		if err != nil {
			t.Fatal(err)
		}
		return &protocol.JobBody{JID: "20260101000000000001", Fun: "state.apply",
			Kwarg: map[string]any{protocol.KwargSealed: sealed, protocol.KwargKeys: boxes}}
	}
	b := mk(map[string][]byte{"cam1": a.id.Pub, "cam2": other.id.Pub})
	if err := a.openSealed(b); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Kwarg["__state__"].(map[string]any); !ok || b.Kwarg[protocol.KwargSealed] != nil || b.Kwarg["not_master_data"] != nil {
		t.Errorf("opened kwargs %v", b.Kwarg)
	}
	if err := a.openSealed(mk(map[string][]byte{"cam2": other.id.Pub})); err == nil {
		t.Error("opened a job sealed to another device only")
	}
	bad := mk(map[string][]byte{"cam1": a.id.Pub})
	bad.Kwarg[protocol.KwargSealed].([]byte)[3] ^= 1
	if err := a.openSealed(bad); err == nil {
		t.Error("opened an altered job")
	}
	bad.Kwarg[protocol.KwargKeys] = "x"
	if err := a.openSealed(bad); err == nil {
		t.Error("opened a malformed job")
	}
}
