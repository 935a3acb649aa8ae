package keys

import (
	"errors"
	"testing"

	"github.com/halite-fleet/halite/protocol"
)

// TestCheckProxy: a proxy minion's id is bound to the relay that first
// presented it (kept across a restart of the store); another relay's
// proxy Hello for it is refused, as is a proxy Hello for an id that has a
// key of its own; deleting the key forgets the binding.
func TestCheckProxy(t *testing.T) {
	f := newFixture(t, Options{})
	k1, k2, agentKey := newKey(t), newKey(t), newKey(t)
	dec, err := f.s.CheckProxy("cam7", k1, "r1")
	if err != nil || dec.Status != protocol.KeyPending {
		t.Fatalf("first proxy hello: got %+v, %v; want pending", dec, err)
	}
	if got := f.s.ProxiedBy("cam7"); got != "r1" {
		t.Errorf("ProxiedBy: got %q, want r1", got)
	}
	if _, err := f.s.CheckProxy("cam7", k2, "r2"); !errors.Is(err, ErrProxiedElsewhere) {
		t.Errorf("another relay's proxy hello: got %v, want ErrProxiedElsewhere", err)
	}
	if _, err := f.s.Accept("cam7", false, false); err != nil {
		t.Fatal(err)
	}
	f.reopen()
	if dec, err := f.s.CheckProxy("cam7", k1, "r1"); err != nil || dec.Status != protocol.KeyAccepted {
		t.Errorf("after a restart: got %+v, %v; want accepted", dec, err)
	}
	if got := f.s.Proxied(); len(got) != 1 || got["cam7"] != "r1" {
		t.Errorf("Proxied after a restart: got %v", got)
	}

	// An agent's own key is not turned into a proxy minion.
	if _, err := f.s.Check("box1", agentKey, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.CheckProxy("box1", k1, "r1"); !errors.Is(err, ErrProxiedElsewhere) {
		t.Errorf("proxy hello for an agent's id: got %v, want ErrProxiedElsewhere", err)
	}
	if got := f.s.ProxiedBy("box1"); got != "" {
		t.Errorf("box1 bound to %q", got)
	}

	// A deleted key forgets its relay: another relay may take the id.
	if _, err := f.s.Delete("cam7"); err != nil {
		t.Fatal(err)
	}
	if got := f.s.ProxiedBy("cam7"); got != "" {
		t.Errorf("after delete: bound to %q", got)
	}
	if dec, err := f.s.CheckProxy("cam7", k2, "r2"); err != nil || dec.Status != protocol.KeyPending {
		t.Errorf("after delete, r2: got %+v, %v", dec, err)
	}
}
