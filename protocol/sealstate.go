package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// Sealed state jobs (capability 13): a state job's compiled states hold
// values rendered from the device's pillar (file contents, arguments), so
// the master sends them sealed. The job's signed Kwarg carries, instead
// of "__state__":
//
//	"__sealed__": ChaCha20-Poly1305 under a random content key K (nonce
//	              zero: K is used once), additional data "halite state v1"
//	              || jid, of the CBOR map of the sealed kwargs
//	              ({"__state__": …});
//	"__keys__":   device id -> SealTo(device key, id, PurposeState,
//	              jid || SHA-256(__sealed__), K).
//
// Every device a job is for (its __for__) gets its own box of K; devices
// share a job only when their compiled states are equal, so K opens
// nothing a device would not get anyway. The master's signature covers
// the sealed bytes and the boxes: a relay can neither read nor swap them.

// Kwarg keys of a sealed state job.
const (
	KwargSealed = "__sealed__"
	KwargKeys   = "__keys__"
)

// PurposeState is the sealing purpose of a state job's content key.
const PurposeState = "state"

const adState = "halite state v1\x00"

// SealKwargs seals plain (the kwargs to hide) for job jid to every device
// of to (id -> accepted key), returning the values of KwargSealed and
// KwargKeys.
func SealKwargs(jid string, plain map[string]any, to map[string]ed25519.PublicKey) (sealed []byte, keys map[string]any, err error) {
	enc, err := Marshal(plain)
	if err != nil {
		return nil, nil, fmt.Errorf("seal state: %w", err)
	}
	k := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, nil, fmt.Errorf("seal state: %w", err)
	}
	aead, err := chacha20poly1305.New(k)
	if err != nil {
		return nil, nil, fmt.Errorf("seal state: %w", err)
	}
	var nonce [chacha20poly1305.NonceSize]byte
	sealed = aead.Seal(nil, nonce[:], enc, []byte(adState+jid))
	ad := stateKeyAD(jid, sealed)
	keys = make(map[string]any, len(to))
	for id, pub := range to {
		box, err := SealTo(pub, id, PurposeState, ad, k)
		if err != nil {
			return nil, nil, fmt.Errorf("seal state for %s: %w", id, err)
		}
		keys[id] = box
	}
	return sealed, keys, nil
}

func stateKeyAD(jid string, sealed []byte) []byte {
	sum := sha256.Sum256(sealed)
	return append([]byte(jid+"\x00"), sum[:]...)
}

// OpenKwargs opens what SealKwargs sealed for job jid with this identity,
// the device id: its box in keys, then sealed. Anything missing, altered
// or for another device is a *ProtoError of KindBadSig.
func (ident *Identity) OpenKwargs(id, jid string, sealed []byte, keys map[string]any) (map[string]any, error) {
	box, ok := keys[id].([]byte)
	if !ok {
		return nil, Errorf(KindBadSig, "sealed state of job %s has no key for %s", jid, id)
	}
	k, err := ident.Open(id, PurposeState, stateKeyAD(jid, sealed), box)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.New(k)
	if err != nil {
		return nil, Errorf(KindBadSig, "sealed state of job %s: %v", jid, err)
	}
	var nonce [chacha20poly1305.NonceSize]byte
	enc, err := aead.Open(nil, nonce[:], sealed, []byte(adState+jid))
	if err != nil {
		return nil, Errorf(KindBadSig, "sealed state of job %s does not open: altered", jid)
	}
	var out map[string]any
	if err := Unmarshal(enc, &out); err != nil {
		return nil, Errorf(KindBadSig, "sealed state of job %s: %v", jid, err)
	}
	return out, nil
}
