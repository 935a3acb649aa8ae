package agent

import (
	"crypto/ed25519"
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

// Pin states of a key: nothing pinned, the pinned key, another key.
const (
	pinNone = iota
	pinSame
	pinOther
)

// pinState compares pub with the key pinned by the fingerprint option
// finger, else by pki_dir/file.
func (a *Agent) pinState(finger, file string, pub ed25519.PublicKey) int {
	if finger != "" {
		if protocol.SameFingerprint(finger, protocol.Fingerprint(pub)) {
			return pinSame
		}
		return pinOther
	}
	b, err := os.ReadFile(filepath.Join(a.cfg.PkiDir, file))
	if err != nil {
		return pinNone
	}
	if old, err := protocol.ParsePublicKey(b); err == nil && old.Equal(pub) {
		return pinSame
	}
	return pinOther
}

// checkPeer is the TLS handshake's check of the peer's key.
func (a *Agent) checkPeer(pub ed25519.PublicKey) error {
	m := a.pinState(a.cfg.MasterFinger, protocol.MasterPinFile, pub)
	if m == pinSame {
		return a.pin(pub)
	}
	if m == pinNone || a.pinState(a.cfg.RelayFinger, relayPinFile, pub) != pinOther {
		return nil // decided by pinAfterStatus
	}
	return a.pinFail(fmt.Sprintf("peer key %s is neither the pinned master's nor the pinned relay's", protocol.Fingerprint(pub)))
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

// pinRelay checks the relay's key against relay_finger, or the key
// recorded on first use, recording it if none is.
func (a *Agent) pinRelay(pub ed25519.PublicKey) error {
	fp := protocol.Fingerprint(pub)
	switch a.pinState(a.cfg.RelayFinger, relayPinFile, pub) {
	case pinSame:
		return nil
	case pinOther:
		return a.pinFail(fmt.Sprintf("relay key %s is not the pinned one (relay_finger, or pki_dir/%s: remove that file if the relay was replaced on purpose)", fp, relayPinFile))
	}
	path := filepath.Join(a.cfg.PkiDir, relayPinFile)
	if err := os.WriteFile(path, protocol.EncodePublicKey(pub), 0o644); err != nil {
		return fmt.Errorf("record relay key: %w", err)
	}
	a.log.Info("pinned the relay's key on first use", zap.String("finger", fp), zap.String("file", path))
	return nil
}
