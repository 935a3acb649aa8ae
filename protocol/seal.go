package protocol

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"math/big"

	"golang.org/x/crypto/chacha20poly1305"
)

// Sealing: data that only one device may read (its pillar, a state job
// rendered with it) is encrypted by the master to that device's identity
// key, end to end, so that a relay forwarding it, or anything that reads
// a relay's disk, sees only ciphertext.
//
// The device's ed25519 identity key doubles as an X25519 key (the
// birational map from Edwards to Montgomery form, as age and libsodium's
// crypto_sign_ed25519_pk_to_curve25519 do): the master needs no new key
// from the device and nothing in the Hello changes. A sealed box is
//
//	ephemeral X25519 public half (32 bytes) || ChaCha20-Poly1305 ciphertext
//
// under the key HKDF-SHA256(X25519(eph, device), salt: eph || device,
// info: "halite seal v1" || id || purpose), nonce zero (every key is used
// once), with the caller's additional data (a jid, say) authenticated.
// The key is bound to the device's id and the purpose, so a box for one
// device or one use does not open as another's. It does not depend on the
// session: a box kept by a relay for an offline device still opens after
// the device reconnects.

const infoSeal = "halite seal v1\x00"

// SealOverhead is how many bytes sealing adds: the ephemeral half and the tag.
const SealOverhead = 32 + chacha20poly1305.Overhead

// SealTo encrypts plain to the device whose identity key is pub and whose
// id is id, for purpose (a short constant: "pillar", "state"), with ad
// authenticated but not encrypted.
func SealTo(pub ed25519.PublicKey, id, purpose string, ad, plain []byte) ([]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("seal: device key of %d bytes", len(pub))
	}
	u, err := montgomeryU(pub)
	if err != nil {
		return nil, err
	}
	dev, err := ecdh.X25519().NewPublicKey(u)
	if err != nil {
		return nil, fmt.Errorf("seal: device key: %w", err)
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	secret, err := eph.ECDH(dev)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	ephPub := eph.PublicKey().Bytes()
	aead, err := sealAEAD(secret, ephPub, dev.Bytes(), id, purpose)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(ephPub)+len(plain)+chacha20poly1305.Overhead)
	out = append(out, ephPub...)
	var nonce [chacha20poly1305.NonceSize]byte
	return aead.Seal(out, nonce[:], plain, ad), nil
}

// Open decrypts a box SealTo made for this identity under id and purpose
// with the same ad. A box for another key, id, purpose or ad, or one
// altered on the way, is a *ProtoError of KindBadSig.
func (ident *Identity) Open(id, purpose string, ad, box []byte) ([]byte, error) {
	if len(box) < SealOverhead {
		return nil, Errorf(KindBadSig, "sealed box of %d bytes, want at least %d", len(box), SealOverhead)
	}
	priv, err := ident.sealKey()
	if err != nil {
		return nil, err
	}
	ephPub, err := ecdh.X25519().NewPublicKey(box[:32])
	if err != nil {
		return nil, Errorf(KindBadSig, "sealed box: %v", err)
	}
	secret, err := priv.ECDH(ephPub)
	if err != nil {
		return nil, Errorf(KindBadSig, "sealed box: %v", err)
	}
	aead, err := sealAEAD(secret, box[:32], priv.PublicKey().Bytes(), id, purpose)
	if err != nil {
		return nil, err
	}
	var nonce [chacha20poly1305.NonceSize]byte
	plain, err := aead.Open(nil, nonce[:], box[32:], ad)
	if err != nil {
		return nil, Errorf(KindBadSig, "sealed box does not open: altered, or not for %s", id)
	}
	return plain, nil
}

// fieldP is 2^255 - 19, the field of Curve25519 and Ed25519.
var fieldP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// montgomeryU maps an ed25519 public key (the point's y, little endian,
// with the sign of x in the top bit) to the X25519 public key of the same
// secret: u = (1 + y) / (1 - y) mod p (RFC 7748, section 4.1). math/big,
// not a curve package: the agent links math/big already, and this runs on
// the master only.
func montgomeryU(pub ed25519.PublicKey) ([]byte, error) {
	var be [32]byte
	for i, b := range pub {
		be[31-i] = b
	}
	be[0] &= 0x7f
	y := new(big.Int).SetBytes(be[:])
	one := big.NewInt(1)
	den := new(big.Int).Sub(one, y)
	den.Mod(den, fieldP)
	if y.Cmp(fieldP) >= 0 || den.Sign() == 0 {
		return nil, fmt.Errorf("seal: device key is not a curve point")
	}
	u := new(big.Int).Add(one, y)
	u.Mul(u, new(big.Int).ModInverse(den, fieldP))
	u.Mod(u, fieldP)
	out := make([]byte, 32)
	u.FillBytes(be[:])
	for i := range out {
		out[i] = be[31-i]
	}
	return out, nil
}

// sealKey is the identity's X25519 private half: the clamped scalar of its
// ed25519 seed (the first half of SHA-512(seed), as ed25519 itself uses;
// X25519 clamps it).
func (ident *Identity) sealKey() (*ecdh.PrivateKey, error) {
	h := sha512.Sum512(ident.Priv.Seed())
	k, err := ecdh.X25519().NewPrivateKey(h[:32])
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return k, nil
}

func sealAEAD(secret, ephPub, devPub []byte, id, purpose string) (interface {
	Seal(dst, nonce, plaintext, additionalData []byte) []byte
	Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error)
}, error) {
	salt := append(append(make([]byte, 0, 64), ephPub...), devPub...)
	key, err := hkdf.Key(sha256.New, secret, salt, infoSeal+id+"\x00"+purpose, chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return chacha20poly1305.New(key)
}
