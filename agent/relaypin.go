package agent

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// An agent's peer is its master, or a relay in front of it. The TLS
// handshake shows the peer's key; which of the two it is shows only in the
// KeyStatus: a relay forwards the master's, which carries the master's key
// (KeyStatus.MasterKey). So the handshake refuses only a peer that can be
// neither (both keys pinned, it is neither), and the rest is decided when
// the KeyStatus arrives (pinAfterStatus): the master's key is pinned as
// always (master_finger or pki_dir/minion_master.pub) and verifies jobs and
// the key agreement; a relay's key is pinned apart (relay_finger or
// pki_dir/minion_relay.pub, on first use).

// relayPinFile is where the relay's key is recorded on first use.
const relayPinFile = "minion_relay.pub"

// checkPeer is the TLS handshake's check of the peer's key.
func (a *Agent) checkPeer(pub ed25519.PublicKey) error {
	master, masterKnown := a.pinnedMaster()
	if masterKnown && master(pub) {
		return a.pin(pub)
	}
	relay, relayKnown := a.pinnedRelay()
	if relayKnown && relay(pub) {
		return nil
	}
	if masterKnown && relayKnown {
		return a.pinFail(fmt.Sprintf("peer key %s is neither the pinned master's nor the pinned relay's", protocol.Fingerprint(pub)))
	}
	return nil // decided by pinAfterStatus
}

// pinAfterStatus pins the peer of conn once its KeyStatus st is read, as
// the master or, when st carries the master's key, as a relay.
func (a *Agent) pinAfterStatus(conn *quic.Conn, st *protocol.KeyStatus) error {
	peer, err := protocol.PeerKey(conn.ConnectionState().TLS)
	if err != nil {
		return fmt.Errorf("peer key: %w", err)
	}
	if st.MasterKey == nil || peer.Equal(ed25519.PublicKey(st.MasterKey)) {
		return a.pin(peer)
	}
	if err := a.pinRelay(peer); err != nil {
		return err
	}
	return a.pin(ed25519.PublicKey(st.MasterKey))
}

// pinnedMaster returns a test for the master's key when one is pinned.
func (a *Agent) pinnedMaster() (func(ed25519.PublicKey) bool, bool) {
	if a.cfg.MasterFinger != "" {
		return func(p ed25519.PublicKey) bool {
			return protocol.SameFingerprint(a.cfg.MasterFinger, protocol.Fingerprint(p))
		}, true
	}
	if old, err := readPub(filepath.Join(a.cfg.PkiDir, "minion_master.pub")); err == nil {
		return func(p ed25519.PublicKey) bool { return old.Equal(p) }, true
	}
	return nil, false
}

// pinnedRelay returns a test for the relay's key when one is pinned.
func (a *Agent) pinnedRelay() (func(ed25519.PublicKey) bool, bool) {
	if f := a.cfg.RelayFinger; f != "" {
		return func(p ed25519.PublicKey) bool { return protocol.SameFingerprint(f, protocol.Fingerprint(p)) }, true
	}
	if old, err := readPub(filepath.Join(a.cfg.PkiDir, relayPinFile)); err == nil {
		return func(p ed25519.PublicKey) bool { return old.Equal(p) }, true
	}
	return nil, false
}

// pinRelay checks the relay's key against relay_finger, or the key
// recorded on first use, recording it if none is.
func (a *Agent) pinRelay(pub ed25519.PublicKey) error {
	fp := protocol.Fingerprint(pub)
	if f := a.cfg.RelayFinger; f != "" {
		if !protocol.SameFingerprint(f, fp) {
			return a.pinFail(fmt.Sprintf("relay key fingerprint %s does not match relay_finger %s", fp, f))
		}
		return nil
	}
	path := filepath.Join(a.cfg.PkiDir, relayPinFile)
	old, err := readPub(path)
	switch {
	case err == nil:
		if !old.Equal(pub) {
			return a.pinFail(fmt.Sprintf("relay key changed: it is now %s, pinned %s in %s; if the relay was replaced on purpose, remove that file", fp, protocol.Fingerprint(old), path))
		}
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(path, protocol.EncodePublicKey(pub), 0o644); err != nil {
			return fmt.Errorf("record relay key: %w", err)
		}
		a.log.Info("pinned the relay's key on first use", zap.String("finger", fp), zap.String("file", path))
	default:
		return a.pinFail(fmt.Sprintf("pinned relay key %s is unreadable: %v", path, err))
	}
	return nil
}

func readPub(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return protocol.ParsePublicKey(b)
}
