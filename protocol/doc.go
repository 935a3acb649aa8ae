// Package protocol is Halite's wire protocol: the messages that masters,
// relays and agents exchange, their CBOR encoding with hard limits, the
// framing of messages on a QUIC stream, protocol versions, identities
// (ed25519 keys, fingerprints, TLS certificates bound to them) and the
// signatures that let a relay forward jobs and returns without being able to
// forge them. It imports nothing of ours; everything else imports it.
//
// # Connection flow
//
// An agent (or a relay, which is an agent too) dials its master over QUIC
// with TLS 1.3 and ALPN [ALPN]. Both sides present a self-signed certificate
// whose key is their long-lived ed25519 identity key; each side learns the
// other's public key from the handshake and names the peer by its
// [Fingerprint]. The agent refuses a master whose fingerprint differs from
// the one it pinned (master_finger, or the one recorded on first use).
//
// An agent with several masters (Salt's multimaster) holds one such
// connection per master (hot) or one at a time (failover); the protocol is
// the same on each, and masters of one set share their identity key, so
// that one pin serves them all.
//
// The agent opens one bidirectional stream and every message of the
// connection travels on it, in frames (see [WriteFrame]):
//
//	agent                                   master
//	  | Hello{id, version, caps, grains}  --> |  key looked up: accepted,
//	  |                                       |  pending, rejected or denied
//	  | <-- KeyStatus{status, master id}      |
//	  |   (not accepted: the master closes the connection; the agent retries
//	  |    with jittered backoff, acceptance_wait_time .. _max)
//	  | <-- Job{payload, sig}                 |  signed by the master's key
//	  | Return{payload, sig, seq}         --> |  signed by the agent's key
//	  | <-- Ack{seq}                          |  stored: returns and events
//	  |                                       |  up to seq may be forgotten
//	  | Event{payload, sig, seq}          --> |  signed by the agent's key
//	  | <-- Ack{seq}                          |  published
//	  | Grains{grains}                    --> |  after saltutil.refresh_grains
//	  | <-- Ping{seq} / Pong{seq} -->         |  either side, liveness
//	  | <-- Error{kind, msg} -->              |  then the sender closes
//
// A Job, Return or Event carries its body as signed CBOR bytes, so a relay
// can pass them on unchanged and the far end verifies the signature with the
// key it holds for the claimed sender. A receiver refuses a signed body whose
// id differs from the identity it knows the sender by.
//
// Delivery of returns and events is at least once: the agent keeps each in
// an on-disk outbox under a per-agent increasing seq, sends what is not
// acknowledged again on every new connection, and forgets it only when the
// master's cumulative [Ack] covers its seq (seq 0 asks for no ack; a master
// older than [CapAck] sends none, and the agent forgets an item once
// written). The master stores returns idempotently on (jid, id) and fires a
// return's event only the first time, so a replay does not repeat it.
// Seq lies outside the signature: a relay could alter it, or forge acks,
// and at worst make the agent forget an item early, which it could as well
// do by dropping it. Relays pass the master's acks on (see Relays).
//
// # Relays
//
// A device may reach the master through a relay (capability 5). The device
// speaks the flow above to the relay, unchanged; the relay keeps one link
// to the master: a connection whose first stream opens with
// Hello{Relay: true} (the relay's own key, accepted like any agent's) and
// then carries the master's jobs for the relay's devices, once per relay
// ([Job] with IDs when the relay cannot evaluate the target itself). Every
// further stream of the link is one device:
//
//	device            relay                               master
//	  | Hello -->       | Hello{…, Pub: device's TLS key} -->  |  KXSig must verify under Pub
//	  | <-- KeyStatus   | <-- KeyStatus{…, KX, KXSig, MasterKey} |
//	  | Return{mac} --> | (kept until acked)   Return{mac} -->   |  MAC and id checked
//	  | <-- Ack         | <-- Ack (forwarded: acks are end to end) |
//	  | <-- Job         | <-- Job on the link's first stream      |  signed once
//
// From capability 6 ([CapBatch]) the relay does not send returns and
// events on the device streams: it appends them, each with the device's
// id and stream, to a [Batch] that it sends on the control stream when it
// is big enough or old enough. The items are the devices' own frames,
// unchanged, so the master checks each as if its device's stream had
// carried it, and acks still come down each device's stream. Everything
// else of a device's session stays on its stream.
//
// MasterKey tells the device that its TLS peer is a relay: it pins the
// relay's key apart and verifies jobs and KXSig with the master's. The
// master's key agreement half is derived from its identity and the
// device's half ([Identity.SessionKX]), so when the link drops the relay
// sends the same Hello again and the session, and its MAC key, go on: what
// the relay held meanwhile still verifies. The relay sees every public half
// and every body but can compute no MAC key and no signature.
//
// Versions have two levels: the ALPN string changes only on a breaking
// change (peers that do not share it cannot connect), and [CapabilityVersion]
// grows for every compatible addition; each side sends its own in Hello and
// KeyStatus and uses the smaller of the two.
package protocol
