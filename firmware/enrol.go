package firmware

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
)

// DeviceKey is an agent's key pair in the agent's own format: what
// protocol.LoadOrCreateIdentity reads from pki_dir/minion.pem and writes
// to minion.pub.
type DeviceKey struct {
	PrivPEM []byte // PEM "PRIVATE KEY" (PKCS#8 ed25519), mode 0600 on the device
	Pub     ed25519.PublicKey
}

// PubPEM is the public key as minion.pub and the master's key files hold it.
func (k DeviceKey) PubPEM() []byte { return protocol.EncodePublicKey(k.Pub) }

// Finger is the key's fingerprint, as halite-key -f prints it.
func (k DeviceKey) Finger() string { return protocol.Fingerprint(k.Pub) }

// NewDeviceKey makes a new agent key pair.
func NewDeviceKey() (DeviceKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return DeviceKey{}, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return DeviceKey{}, fmt.Errorf("encode key: %w", err)
	}
	return DeviceKey{
		PrivPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		Pub:     priv.Public().(ed25519.PublicKey),
	}, nil
}

// ParseDeviceKey reads an agent's minion.pem (as read from a device: hostile
// input, bounded by the caller). The public key is derived from the
// private one, so a device cannot pair its key with another's public key.
func ParseDeviceKey(b []byte) (DeviceKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return DeviceKey{}, errors.New("no PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return DeviceKey{}, fmt.Errorf("parse private key: %w", err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return DeviceKey{}, errors.New("not an ed25519 key")
	}
	return DeviceKey{PrivPEM: pem.EncodeToMemory(blk), Pub: priv.Public().(ed25519.PublicKey)}, nil
}

// Master is the master that flashed devices enrol with, as seen from the
// operator's side. Keys are accepted through the master's local socket
// when a master answers there (the running master is the only writer of
// its key store), else written into its key store under PkiDir directly
// (a master that is not running loads them when it starts). Either way the
// master ends with exactly the key the flasher vouches for, accepted,
// with no pending step.
type Master struct {
	PkiDir string // the master's pki_dir; "" when only the socket is known
	Socket string // the master's local API socket; "" for none

	mu    sync.Mutex
	store *keys.Store // opened on first direct use
}

// ErrKeyConflict is returned by Enrol when the master holds another key for
// the id and replacing it was not asked for.
var ErrKeyConflict = errors.New("the master holds another key for this id")

// live reports whether a master answers on the socket.
func (m *Master) live() bool {
	if m.Socket == "" {
		return false
	}
	c, err := net.DialTimeout("unix", m.Socket, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Finger returns the fingerprint of the master's public key: from
// PkiDir/master.pub, else from the running master. It is what devices
// pin (master_finger); it is never learnt from the network.
func (m *Master) Finger(ctx context.Context) (string, error) {
	if m.PkiDir != "" {
		p := filepath.Join(m.PkiDir, "master.pub")
		b, err := os.ReadFile(p)
		if err == nil {
			pub, err := protocol.ParsePublicKey(b)
			if err != nil {
				return "", fmt.Errorf("master key %s: %w", p, err)
			}
			return protocol.Fingerprint(pub), nil
		}
		if !m.live() {
			return "", fmt.Errorf("read the master's public key: %w (start halite-master once to make its key, or give --master-pki)", err)
		}
	}
	res, err := m.wheel(ctx, "key.finger_master")
	if err != nil {
		return "", fmt.Errorf("ask the master for its fingerprint: %w", err)
	}
	local, _ := res["local"].(map[string]any)
	fp, _ := local["master.pub"].(string)
	if fp == "" {
		return "", errors.New("the master did not say its fingerprint")
	}
	return fp, nil
}

func (m *Master) wheel(ctx context.Context, fun string, arg ...any) (map[string]any, error) {
	return m.wheelKw(ctx, fun, nil, arg...)
}

func (m *Master) wheelKw(ctx context.Context, fun string, kw map[string]any, arg ...any) (map[string]any, error) {
	if m.Socket == "" {
		return nil, errors.New("no master socket (give the master's config dir with -c, or --master-pki)")
	}
	res, err := api.Call(ctx, m.Socket, &api.Request{Op: api.OpWheel, Fun: fun, Arg: arg, Kwarg: kw})
	if err != nil {
		return nil, err
	}
	out, _ := res.(map[string]any)
	return out, nil
}

// Enrol makes the master accept a key for id and returns it. have is the
// device's present key (read over SSH), or nil. The key is have when the
// master already accepts it, or (direct writes) when the master knows no
// other key for id; else a new pair: the running master makes it
// (key.gen_accept), since its wheel accepts keys it made, not keys it is
// handed. replace lets a different key the master holds for id (in any
// state) be dropped; without it that is ErrKeyConflict.
func (m *Master) Enrol(ctx context.Context, id string, have *DeviceKey, replace bool) (DeviceKey, error) {
	if err := protocol.ValidID(id); err != nil {
		return DeviceKey{}, err
	}
	if m.live() {
		return m.enrolLive(ctx, id, have, replace)
	}
	if m.PkiDir == "" {
		return DeviceKey{}, fmt.Errorf("no master answers on %s and no --master-pki was given", m.Socket)
	}
	return m.enrolDirect(id, have, replace)
}

func (m *Master) enrolLive(ctx context.Context, id string, have *DeviceKey, replace bool) (DeviceKey, error) {
	fingers, err := m.wheel(ctx, "key.finger", id)
	if err != nil {
		return DeviceKey{}, fmt.Errorf("ask the master for the key of %s: %w", id, err)
	}
	held := false
	for st, v := range fingers {
		ids, ok := v.(map[string]any)
		if !ok || ids[id] == nil {
			continue
		}
		if st == keys.DirAccepted && have != nil && ids[id] == have.Finger() {
			return *have, nil
		}
		held = true
	}
	if held && !replace {
		return DeviceKey{}, fmt.Errorf("enrol %s: %w", id, ErrKeyConflict)
	}
	res, err := m.wheelKw(ctx, "key.gen_accept", map[string]any{"force": replace}, id)
	if err != nil {
		return DeviceKey{}, fmt.Errorf("enrol %s: key.gen_accept: %w", id, err)
	}
	priv, _ := res["priv"].(string)
	if priv == "" {
		return DeviceKey{}, fmt.Errorf("enrol %s: %w (it came while the flasher asked)", id, ErrKeyConflict)
	}
	k, err := ParseDeviceKey([]byte(priv))
	if err != nil {
		return DeviceKey{}, fmt.Errorf("enrol %s: the master's key.gen_accept: %w", id, err)
	}
	return k, nil
}

func (m *Master) enrolDirect(id string, have *DeviceKey, replace bool) (DeviceKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.store == nil {
		s, err := keys.Open(m.PkiDir, keys.Options{})
		if err != nil {
			return DeviceKey{}, err
		}
		m.store = s
	}
	fingers, err := m.store.Finger(id)
	if err != nil {
		return DeviceKey{}, err
	}
	held := false
	for st, ids := range fingers {
		fp, ok := ids[id]
		if !ok {
			continue
		}
		if st == keys.DirAccepted && have != nil && fp == have.Finger() {
			return *have, nil
		}
		held = true
	}
	if held {
		if !replace {
			return DeviceKey{}, fmt.Errorf("enrol %s: %w", id, ErrKeyConflict)
		}
		if _, err := m.store.DeleteDict(keys.EveryState(id)); err != nil {
			return DeviceKey{}, fmt.Errorf("enrol %s: %w", id, err)
		}
	}
	k := DeviceKey{}
	if have != nil {
		k = *have
	} else if k, err = NewDeviceKey(); err != nil {
		return DeviceKey{}, err
	}
	if _, err := m.store.Check(id, k.Pub, ""); err != nil {
		return DeviceKey{}, fmt.Errorf("enrol %s: %w", id, err)
	}
	if _, err := m.store.AcceptDict(keys.Dict{keys.DirPending: {id}}, false, false); err != nil {
		return DeviceKey{}, fmt.Errorf("enrol %s: %w", id, err)
	}
	if pk, ok := m.store.AcceptedKey(id); !ok || !pk.Equal(k.Pub) {
		return DeviceKey{}, fmt.Errorf("enrol %s: the key was not accepted (autoreject?)", id)
	}
	return k, nil
}
