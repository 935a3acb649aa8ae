package protocol

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"sync"
)

// Signature domains: a signature made for one kind of body never verifies as
// another kind.
const (
	domainJob    = "halite job v1\x00"
	domainReturn = "halite return v1\x00"
	domainEvent  = "halite event v1\x00"
)

// Signed is the shape of every signed message: the CBOR of a body and a
// tag over a domain string followed by those bytes. The tag is either an
// ed25519 signature (64 bytes) by the sender's identity key, or an
// HMAC-SHA256 (32 bytes) under the MAC key the sender and the far end
// agreed for the session (see KX); a relay between them knows neither.
type Signed struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// MadeBy reports whether body, the CBOR of a ReturnBody or an EventBody as
// Marshal encodes it, was made under agent id, without decoding it: such a
// body is a map (deterministic encoding: its header first, in one byte for
// up to 23 entries) whose first key is 1, the id. The agent checks its
// outbox with it after a restart, the relay each signed body a device sends.
func MadeBy(body []byte, id string) bool {
	want, err := Marshal(id)
	if err != nil || len(body) < 2+len(want) || body[0]>>5 != 5 || body[1] != 0x01 {
		return false
	}
	return string(body[2:2+len(want)]) == string(want)
}

func seal(key ed25519.PrivateKey, domain string, body any) (Signed, error) {
	b, err := Marshal(body)
	if err != nil {
		return Signed{}, err
	}
	msg := make([]byte, 0, len(domain)+len(b))
	msg = append(append(msg, domain...), b...)
	return Signed{Body: b, Sig: ed25519.Sign(key, msg)}, nil
}

func sealMAC(key []byte, domain string, body any) (Signed, error) {
	if len(key) != MACKeySize {
		return Signed{}, Errorf(KindBadSig, "MAC key is %d bytes, want %d", len(key), MACKeySize)
	}
	b, err := Marshal(body)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Body: b, Sig: macTag(key, domain, b)}, nil
}

// macTag is HMAC-SHA256 (RFC 2104) under key, a MACKeySize key, of domain
// followed by body. It is crypto/hmac's result (TestMACTagIsHMAC) made with
// sha256.Sum256 over a pooled buffer: hmac.New allocates two hash states
// and two pads, about 500 bytes, for every return and event a master
// checks and an agent tags.
func macTag(key []byte, domain string, body []byte) []byte {
	const block = sha256.BlockSize
	if len(key) > block { // not a session key: RFC 2104 hashes it first
		k := sha256.Sum256(key)
		key = k[:]
	}
	bp := macBufs.Get().(*[]byte)
	buf := append((*bp)[:0], make([]byte, block)...)
	copy(buf, key)
	for i := range block {
		buf[i] ^= 0x36
	}
	buf = append(append(buf, domain...), body...)
	inner := sha256.Sum256(buf)
	var outer [block + sha256.Size]byte
	copy(outer[:], key)
	for i := range block {
		outer[i] ^= 0x5c
	}
	copy(outer[block:], inner[:])
	if cap(buf) <= maxPooledMACBuf {
		*bp = buf
		macBufs.Put(bp)
	}
	tag := sha256.Sum256(outer[:])
	return tag[:]
}

// maxPooledMACBuf is the largest buffer macTag keeps for the next call.
const maxPooledMACBuf = 64 << 10

var macBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// open verifies s with pub (an ed25519 signature) or mac (an HMAC tag; nil
// if the session agreed none) and decodes its body into v.
func (s *Signed) open(pub ed25519.PublicKey, mac []byte, domain string, v any) error {
	switch len(s.Sig) {
	case ed25519.SignatureSize:
		if len(pub) != ed25519.PublicKeySize {
			return Errorf(KindBadSig, "no valid public key to verify with")
		}
		msg := make([]byte, 0, len(domain)+len(s.Body))
		msg = append(append(msg, domain...), s.Body...)
		if !ed25519.Verify(pub, msg, s.Sig) {
			return Errorf(KindBadSig, "signature does not verify")
		}
	case sha256.Size:
		if len(mac) != MACKeySize {
			return Errorf(KindBadSig, "MAC-tagged message but no MAC key agreed")
		}
		if !hmac.Equal(macTag(mac, domain, s.Body), s.Sig) {
			return Errorf(KindBadSig, "MAC does not verify")
		}
	default:
		return Errorf(KindBadSig, "signature is %d bytes, want %d (ed25519) or %d (MAC)", len(s.Sig), ed25519.SignatureSize, sha256.Size)
	}
	if len(s.Body) == 0 || s.Body[0]>>5 != 5 {
		return Errorf(KindMalformed, "signed body is not a map")
	}
	return Unmarshal(s.Body, v)
}
