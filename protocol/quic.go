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

// Keep-alives: the listener decides. QUIC's idle timeout is the smaller of
// the two peers' (RFC 9000 §10.1) and quic-go sends a keep-alive PING after
// half of it without a packet from the peer. An agent's own bounds are
// long, so that its master or relay sets the pace: a master pings every
// KeepAlivePeriod of QUICConfig and drops a silent agent after its
// MaxIdleTimeout, as before; a relay sends no keep-alives of its own and
// advertises its device_timeout, so a device behind it pings once every
// half of that (idle keep-alives were the largest cost of a relay's idle
// devices: a PING and its ACK every 5 s, 0.19 cores for 10,000 devices on
// each side).
const (
	AgentMaxIdleTimeout  = 120 * time.Second
	AgentKeepAlivePeriod = 60 * time.Second
)

// PatientHandshakeIdleTimeout is an agent's handshake idle timeout when
// auth_timeout is unset and a try given up would go to the same master or
// relay again (agent.authTimeout): a relay at its bound on handshakes in
// progress leaves a device's first packet unanswered, and a device that
// gives up at QUICConfig's 5 s starts again with a new key exchange.
const PatientHandshakeIdleTimeout = 20 * time.Second

// HandshakeTryTimeout is the time a try to reach a master or relay has for
// its whole handshake (QUIC and TLS, then the Hello and the key status)
// when it may go idle unanswered for idle: twice that, as quic-go's own
// handshake timeout, and at least 10 s.
func HandshakeTryTimeout(idle time.Duration) time.Duration {
	return max(10*time.Second, 2*idle)
}

// DeviceMaxAckDelay is the max_ack_delay (Config.MaxAckDelay, a field of
// Halite's quic-go copy) advertised on a device's hop, by the agent and by a
// relay's device listener, instead of QUICConfig's 200 ms: how late either
// end may acknowledge, so how long past the round trip the other waits
// before it sends a job or a return again (RFC 9002, Section 6.2.1). A
// relay works through a thousand devices' returns at once on shared cores,
// and a device's CPU is shared with its own work: with 200 ms, a round of
// 10,000 devices behind 10 relays re-sent jobs and returns that had
// arrived, a third more datagrams for every process to handle
// (docs/BENCHMARKS.md). The cost: after a lost packet that nothing follows,
// 300 ms more before it is sent again. The link from a relay to its master
// keeps 200 ms.
const DeviceMaxAckDelay = 500 * time.Millisecond

// AgentQUICConfig is the QUIC configuration of an agent's connection to a
// master or a relay: QUICConfig with the agent's keep-alive bounds, the
// device hop's max_ack_delay (DeviceMaxAckDelay), and its packets sent on
// the connection's own goroutine (SendInline, a field of Halite's quic-go
// copy): an agent sends a few packets a job, and a second goroutine and a
// hand-off per packet cost a small device more than they save.
func AgentQUICConfig() *quic.Config {
	qc := QUICConfig()
	qc.MaxIdleTimeout = AgentMaxIdleTimeout
	qc.KeepAlivePeriod = AgentKeepAlivePeriod
	qc.MaxAckDelay = DeviceMaxAckDelay
	qc.SendInline = true
	return qc
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
