package firmware

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
)

// TestEnrolDirect: with no master running, Enrol writes into the key store
// under pki_dir: a device's key (or a new one) lands accepted, never
// pending; the same key again is kept; another key for the id is refused
// unless replacing was asked for. A master opening the store then finds
// exactly those keys accepted (Salt's preseeded keys: salt-key's
// minions/ directory, salt/key.py).
func TestEnrolDirect(t *testing.T) {
	pki := t.TempDir()
	m := &Master{PkiDir: pki, Socket: pki + "/no.sock"}
	ctx := context.Background()
	made, err := m.Enrol(ctx, "cam1", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := NewDeviceKey()
	if _, err := m.Enrol(ctx, "cam2", &dev, false); err != nil {
		t.Fatal(err)
	}
	if k, err := m.Enrol(ctx, "cam2", &dev, false); err != nil || !k.Pub.Equal(dev.Pub) {
		t.Errorf("the same key again: %v, %v", k.Finger(), err)
	}
	other, _ := NewDeviceKey()
	if _, err := m.Enrol(ctx, "cam2", &other, false); !errors.Is(err, ErrKeyConflict) {
		t.Errorf("another key without replace: got %v, want ErrKeyConflict", err)
	}
	if _, err := m.Enrol(ctx, "cam1", nil, false); !errors.Is(err, ErrKeyConflict) {
		t.Errorf("a new key for a known id without replace: got %v, want ErrKeyConflict", err)
	}
	if k, err := m.Enrol(ctx, "cam2", &other, true); err != nil || !k.Pub.Equal(other.Pub) {
		t.Errorf("replace: %v %v", k.Finger(), err)
	}
	if _, err := m.Enrol(ctx, "a/b", nil, false); err == nil {
		t.Error("an invalid id was enrolled")
	}
	s, err := keys.Open(pki, keys.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := s.List()
	if len(all[keys.DirPending]) != 0 || len(all[keys.DirDenied]) != 0 || len(all[keys.DirAccepted]) != 2 {
		t.Errorf("key store: %v, want cam1 and cam2 accepted only", all)
	}
	if pk, ok := s.AcceptedKey("cam1"); !ok || !pk.Equal(made.Pub) {
		t.Error("cam1's accepted key is not the one Enrol returned")
	}
	if pk, ok := s.AcceptedKey("cam2"); !ok || !pk.Equal(other.Pub) {
		t.Error("cam2's accepted key is not the replacement")
	}
	// The pair is the agent's format.
	k, err := ParseDeviceKey(made.PrivPEM)
	if err != nil || !k.Pub.Equal(made.Pub) {
		t.Errorf("ParseDeviceKey of a made key: %v", err)
	}
	if _, err := protocol.ParsePublicKey(made.PubPEM()); err != nil {
		t.Error(err)
	}
	agentPKI := t.TempDir()
	os.WriteFile(filepath.Join(agentPKI, "minion.pem"), made.PrivPEM, 0o600)
	if id, created, err := protocol.LoadOrCreateIdentity(agentPKI, "minion"); err != nil || created || !id.Pub.Equal(made.Pub) {
		t.Errorf("the agent reading the made key: created %v, %v", created, err)
	}
	if _, err := ParseDeviceKey([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")); err == nil {
		t.Error("a garbage key parsed")
	}
}
