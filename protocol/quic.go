package protocol

import (
	"crypto/sha256"
	"time"

	"github.com/quic-go/quic-go"
)

// QUICConfig is the QUIC configuration every Halite peer uses. Each
// connection carries one long-lived bidirectional stream (measured cheapest:
// a stream per message cost 1.5–4× the CPU), so few streams are allowed.
func QUICConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:  5 * time.Second,
		MaxIdleTimeout:        15 * time.Second,
		KeepAlivePeriod:       5 * time.Second,
		MaxIncomingStreams:    4,
		MaxIncomingUniStreams: -1,
	}
}

// StatelessResetKey derives a listener's QUIC stateless reset key from its
// identity, so that it stays the same across restarts.
func StatelessResetKey(id *Identity) *quic.StatelessResetKey {
	h := sha256.New()
	h.Write([]byte("halite stateless reset key v1\x00"))
	h.Write(id.Priv.Seed())
	var k quic.StatelessResetKey
	copy(k[:], h.Sum(nil))
	return &k
}
