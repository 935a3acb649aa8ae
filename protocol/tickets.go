package protocol

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"sync"
	"time"
)

// TLS 1.3 session resumption between a device and its relay.
//
// A device keeps the session ticket its relay gave it (SessionCache, one
// per peer address) and offers it when it connects again; the relay takes
// it if it can decrypt it with one of its ticket keys (TicketKeys). A
// resumed handshake skips both certificates and both CertificateVerify
// signatures; the key exchange is still made (Go's TLS 1.3 resumes with
// psk_dhe_ke only), so each connection's traffic keys stay forward secret.
//
// What resumption does not change is who a device is. The relay reads the
// device's key from the ticket (the certificate of the full handshake it
// was issued after, sealed under the relay's ticket key) and forwards it
// as the Hello's Pub; the master believes it only with the Hello's KXSig,
// the device's signature over a fresh X25519 half made for this
// connection, and the session's MAC key comes from that half. So a resumed
// connection proves the device's key exactly as a full one does: by a
// signature made now, checked by the master. Someone who could forge
// tickets (only a holder of the relay's identity key, see TicketKeys)
// still cannot say Hello as a device without the device's key.

// TicketKeyPeriod is how long one session ticket key issues tickets. A
// listener decrypts with the current key and the one before, so a ticket
// is taken for TicketKeyPeriod to twice that.
const TicketKeyPeriod = 24 * time.Hour

const infoTicketKey = "halite session ticket key v1\x00"

// TicketKeys returns a listener's session ticket keys at now, for
// tls.Config.SetSessionTicketKeys: the key of the current period first
// (it encrypts), then the previous period's. They are derived from the
// identity key and the period's number, so a relay that restarts takes
// the tickets it gave before, and a reconnect storm after the restart
// resumes, without a key file of its own: they are exactly as secret as
// the identity key in pki_dir, whose holder can be the relay anyway, and
// they rotate without state. The derivation is one-way: a ticket key
// that leaks tells nothing of the identity key or of other periods' keys.
func (id *Identity) TicketKeys(now time.Time) [][32]byte {
	p := now.Unix() / int64(TicketKeyPeriod/time.Second)
	return [][32]byte{id.ticketKey(p), id.ticketKey(p - 1)}
}

func (id *Identity) ticketKey(period int64) [32]byte {
	var salt [8]byte
	binary.BigEndian.PutUint64(salt[:], uint64(period))
	var k [32]byte
	b, err := hkdf.Key(sha256.New, id.Priv.Seed(), salt[:], infoTicketKey, len(k))
	if err != nil {
		panic("protocol: ticket key: " + err.Error()) // only for a length HKDF cannot give
	}
	copy(k[:], b)
	return k
}

// SessionCache is a TLS client session cache of one session, for
// tls.Config.ClientSessionCache: a dialer keeps one per peer address (all
// Halite peers are named "halite" in TLS, so one cache shared by several
// peers would offer each one the others' tickets). Go's LRU cache would do
// as well; this one is a few bytes smaller in the agent.
type SessionCache struct {
	mu  sync.Mutex
	key string
	s   *tls.ClientSessionState
}

// Get returns the session kept for key.
func (c *SessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s == nil || c.key != key {
		return nil, false
	}
	return c.s, true
}

// Put keeps s for key in place of what was kept; a nil s forgets key's.
func (c *SessionCache) Put(key string, s *tls.ClientSessionState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == nil {
		if c.key == key {
			c.s = nil
		}
		return
	}
	c.key, c.s = key, s
}
