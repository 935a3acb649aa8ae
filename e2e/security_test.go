package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/protocol"
)

// rawPeer is a hand-driven client speaking the real protocol, to do what a
// well-behaved agent never does.
type rawPeer struct {
	id     *protocol.Identity
	conn   *quic.Conn
	stream *quic.Stream
	f      *protocol.Framer
}

func dialRaw(t *testing.T, port int, id *protocol.Identity) *rawPeer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, fmt.Sprintf("127.0.0.1:%d", port), id.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial master: %v", err)
	}
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	return &rawPeer{id: id, conn: conn, stream: s, f: protocol.NewFramer(s, 0)}
}

func (p *rawPeer) hello(t *testing.T, agentID string) string {
	t.Helper()
	if err := p.f.Write(&protocol.Hello{ID: agentID, Version: "test", Caps: protocol.CapabilityVersion}); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	p.stream.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := p.f.Read()
	if err != nil {
		t.Fatalf("read key status: %v", err)
	}
	ks, ok := m.(*protocol.KeyStatus)
	if !ok {
		t.Fatalf("got %s, want key status", m.Type())
	}
	return ks.Status
}

// closed waits for the master to close the connection.
func (p *rawPeer) closed(t *testing.T) bool {
	t.Helper()
	select {
	case <-p.conn.Context().Done():
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func mustIdentity(t *testing.T) *protocol.Identity {
	t.Helper()
	id, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestHostilePeers: malformed and oversized messages, an agent claiming
// another's id, forged returns and reserved tags; the offender is dropped
// and the honest agent is served throughout.
func TestHostilePeers(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("good", "")
	c.acceptAll("good")
	ping := func(when string) {
		t.Helper()
		if rets, r := c.jsonOut("halite", "good", "test.ping"); rets["good"] != true || r.code != 0 {
			t.Fatalf("%s: the honest agent was not served: exit %d %v %s", when, r.code, rets, r.stderr)
		}
	}

	// Another key claiming an accepted id is denied.
	p := dialRaw(t, c.port, mustIdentity(t))
	if st := p.hello(t, "good"); st != protocol.KeyDenied {
		t.Errorf("impostor of an accepted id: status %q, want denied", st)
	}
	keys, _ := c.jsonOut("halite-key", "-L")
	if den, _ := keys["minions_denied"].([]any); len(den) != 1 || den[0] != "good" {
		t.Errorf("minions_denied: %v, want [good]", keys["minions_denied"])
	}
	ping("after an impostor")

	// Garbage instead of a hello.
	p = dialRaw(t, c.port, mustIdentity(t))
	p.stream.Write([]byte{0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff})
	if !p.closed(t) {
		t.Errorf("garbage frame: connection not closed")
	}
	// A frame announcing 1 GiB.
	p = dialRaw(t, c.port, mustIdentity(t))
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30)
	p.stream.Write(hdr[:])
	if !p.closed(t) {
		t.Errorf("oversized frame: connection not closed")
	}
	ping("after malformed peers")

	// An accepted agent that sends a return signed for another id, then
	// one that sends garbage after its hello.
	evil := mustIdentity(t)
	p = dialRaw(t, c.port, evil)
	if st := p.hello(t, "evil"); st != protocol.KeyPending {
		t.Fatalf("new key: %q, want pending", st)
	}
	if r := c.cli("halite-key", "-a", "evil", "-y"); r.code != 0 {
		t.Fatalf("accept evil: %s", r.stderr)
	}
	p = dialRaw(t, c.port, evil)
	if st := p.hello(t, "evil"); st != protocol.KeyAccepted {
		t.Fatalf("evil: %q, want accepted", st)
	}
	forged, _ := protocol.SignReturn(evil.Priv, &protocol.ReturnBody{ID: "good", JID: "20261122120000000000", Fun: "test.ping", Return: true, Success: true})
	p.f.Write(forged)
	if !p.closed(t) {
		t.Errorf("return signed for another id: connection not closed")
	}
	// A reserved tag is refused (logged) without a drop.
	p = dialRaw(t, c.port, evil)
	p.hello(t, "evil")
	ev, _ := protocol.SignEvent(evil.Priv, &protocol.EventBody{ID: "evil", Tag: "salt/auth", Data: map[string]any{"x": 1}})
	p.f.Write(ev)
	waitFor(t, 10*time.Second, "reserved tag logged", func() bool {
		return strings.Contains(c.master.output(), "reserved for the master")
	})
	ping("after forged messages")
}

// TestMasterKeyPinned: an agent refuses a master whose key changed.
func TestMasterKeyPinned(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	c.startAgent("pinned", "")
	c.acceptAll("pinned")
	c.kill(c.master)
	// Re-key the master.
	pki := filepath.Join(c.root, "master", "etc", "halite", "pki", "master")
	os.Remove(filepath.Join(pki, "master.pem"))
	os.Remove(filepath.Join(pki, "master.pub"))
	c.startMaster()
	waitFor(t, 45*time.Second, "agent refuses the new master key", func() bool {
		return strings.Contains(c.agents["pinned"].output(), "master key changed")
	})
	if r := c.cli("halite-run", "manage.up", "--out", "json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("manage.up = %q: an agent connected to a re-keyed master", r.stdout)
	}
}
