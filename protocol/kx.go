package protocol

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// MACKeySize is the size of a session MAC key.
const MACKeySize = 32

// Key agreement for returns and events. Verifying an ed25519 signature
// costs about 56 µs, an HMAC about 1 µs, so a master serving 10,000 agents
// would spend half a second of a core per fleet-wide job on signatures
// alone. Instead, each session agrees a MAC key end to end:
//
//   - Hello carries the agent's ephemeral X25519 public key, signed by the
//     agent's identity key together with its id;
//   - KeyStatus carries the master's ephemeral X25519 public key, signed by
//     the master's identity key together with the agent's key and id;
//   - both derive the MAC key with HKDF-SHA256 from the X25519 shared secret.
//
// A relay that forwards Hello and KeyStatus sees both public halves but can
// compute neither the secret nor a valid signature over a substituted half,
// so it can neither forge nor alter a MAC-tagged return. Jobs stay ed25519
// signed: one signature per job, made once and verified by each device.

const (
	domainAgentKX  = "halite kx agent v1\x00"
	domainMasterKX = "halite kx master v1\x00"
	infoMAC        = "halite session mac v1\x00"
	infoSessionKX  = "halite kx master derive v1\x00"
)

// KX is one side's ephemeral X25519 key for a session.
type KX struct {
	priv *ecdh.PrivateKey
}

// NewKX makes a new ephemeral key.
func NewKX() (*KX, error) {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate x25519 key: %w", err)
	}
	return &KX{priv: k}, nil
}

// Public is the key's public half, to send to the peer.
func (k *KX) Public() []byte { return k.priv.PublicKey().Bytes() }

func kxMessage(domain, agentID string, keys ...[]byte) []byte {
	n := len(domain) + len(agentID) + 1
	for _, k := range keys {
		n += len(k)
	}
	msg := make([]byte, 0, n)
	msg = append(msg, domain...)
	msg = append(msg, agentID...)
	msg = append(msg, 0)
	for _, k := range keys {
		msg = append(msg, k...)
	}
	return msg
}

// SignAgentKX signs the agent's half for its Hello.
func SignAgentKX(id *Identity, agentID string, agentKX []byte) []byte {
	return ed25519.Sign(id.Priv, kxMessage(domainAgentKX, agentID, agentKX))
}

// VerifyAgentKX checks the agent's half against its identity key.
func VerifyAgentKX(pub ed25519.PublicKey, agentID string, agentKX, sig []byte) error {
	if len(agentKX) != 32 || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, kxMessage(domainAgentKX, agentID, agentKX), sig) {
		return Errorf(KindBadSig, "agent key agreement does not verify")
	}
	return nil
}

// SignMasterKX signs the master's half for its KeyStatus, bound to the
// agent's half and id.
func SignMasterKX(id *Identity, agentID string, agentKX, masterKX []byte) []byte {
	return ed25519.Sign(id.Priv, kxMessage(domainMasterKX, agentID, agentKX, masterKX))
}

// VerifyMasterKX checks the master's half against its identity key.
func VerifyMasterKX(pub ed25519.PublicKey, agentID string, agentKX, masterKX, sig []byte) error {
	if len(masterKX) != 32 || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, kxMessage(domainMasterKX, agentID, agentKX, masterKX), sig) {
		return Errorf(KindBadSig, "master key agreement does not verify")
	}
	return nil
}

// MACKey derives the session MAC key from this side's key and the peer's
// public half. agentKX and masterKX are both halves, in that order, on both
// sides.
func (k *KX) MACKey(peer []byte, agentID string, agentKX, masterKX []byte) ([]byte, error) {
	pub, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		return nil, Errorf(KindBadSig, "peer key agreement: %v", err)
	}
	secret, err := k.priv.ECDH(pub)
	if err != nil {
		return nil, Errorf(KindBadSig, "key agreement: %v", err)
	}
	salt := append(append([]byte{}, agentKX...), masterKX...)
	key, err := hkdf.Key(sha256.New, secret, salt, infoMAC+agentID, MACKeySize)
	if err != nil {
		return nil, fmt.Errorf("derive MAC key: %w", err)
	}
	return key, nil
}

// SessionKX returns the master's half for an agent's session: derived from
// the master's identity key and the agent's id and half, not random, so
// that the same Hello always gets the same half and so the same MAC key.
// A relay whose upstream link drops (or whose master restarts) sends its
// devices' Hellos again and resumes their sessions where they were: the
// returns it kept meanwhile still verify. The agent's half is fresh for
// every connection the agent makes, so every device session still has
// a key of its own; the relay learns nothing it did not see the first time.
func (id *Identity) SessionKX(agentID string, agentKX []byte) (*KX, error) {
	if len(agentKX) != 32 {
		return nil, Errorf(KindBadSig, "agent key agreement half is %d bytes, want 32", len(agentKX))
	}
	seed, err := hkdf.Key(sha256.New, id.Priv.Seed(), agentKX, infoSessionKX+agentID, 32)
	if err != nil {
		return nil, fmt.Errorf("derive session key: %w", err)
	}
	k, err := ecdh.X25519().NewPrivateKey(seed)
	if err != nil {
		return nil, fmt.Errorf("derive session key: %w", err)
	}
	return &KX{priv: k}, nil
}
