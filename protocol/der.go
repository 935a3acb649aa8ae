package protocol

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// The three DER forms of an ed25519 key Halite reads and writes (RFC 8410):
// the PKCS #8 private key, the PKIX public key and the self-signed
// certificate TLS presents. They are written and read here, for ed25519
// only, instead of with crypto/x509's Marshal, Parse and
// CreateCertificate: those handle RSA and ECDSA keys too, and linking them
// put RSA and ECDSA signing and key parsing into the agent (0.13 MiB on
// armv7) for keys Halite never has. crypto/tls still parses the peer's
// certificate with crypto/x509. The output is byte for byte what
// crypto/x509 writes (der_test.go compares them), and the parsers accept
// what crypto/x509 accepts for an ed25519 key (FuzzKeyDER).

// errNotEd25519 is a well-formed key of another algorithm.
var errNotEd25519 = errors.New("not an ed25519 key")

var (
	// derEd25519Algo is the AlgorithmIdentifier of Ed25519: the OID
	// 1.3.101.112 and no parameters.
	derEd25519Algo = []byte{0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70}
	derEd25519OID  = derEd25519Algo[4:] // the OID's body
	// derPKCS8Prefix precedes the 32-byte seed in a PKCS #8 private key:
	// SEQUENCE { INTEGER 0, algorithm, OCTET STRING { OCTET STRING seed } }.
	derPKCS8Prefix = []byte{0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20}
	// derPKIXPrefix precedes the 32-byte key in a SubjectPublicKeyInfo:
	// SEQUENCE { algorithm, BIT STRING (no unused bits) key }.
	derPKIXPrefix = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}
)

// DER tags used here (universal class; 0x20 marks a constructed value).
const (
	tagBoolean     = 0x01
	tagInteger     = 0x02
	tagBitString   = 0x03
	tagOctetString = 0x04
	tagOID         = 0x06
	tagUTF8String  = 0x0c
	tagPrintable   = 0x13
	tagUTCTime     = 0x17
	tagGenTime     = 0x18
	tagSequence    = 0x30
	tagSet         = 0x31
)

// marshalPKCS8 is x509.MarshalPKCS8PrivateKey for an ed25519 key.
func marshalPKCS8(priv ed25519.PrivateKey) []byte {
	return append(append([]byte{}, derPKCS8Prefix...), priv.Seed()...)
}

// marshalPKIX is x509.MarshalPKIXPublicKey for an ed25519 key.
func marshalPKIX(pub ed25519.PublicKey) []byte {
	return append(append([]byte{}, derPKIXPrefix...), pub...)
}

// parsePKCS8 reads a PKCS #8 private key as x509.ParsePKCS8PrivateKey
// does: SEQUENCE { INTEGER version, AlgorithmIdentifier, OCTET STRING
// { OCTET STRING seed } ...}, where later fields (attributes, the public
// key of a version 2 key) and bytes after the sequence are ignored.
// A key of another algorithm is errNotEd25519.
func parsePKCS8(der []byte) (ed25519.PrivateKey, error) {
	seq, _, err := derRead(der, tagSequence)
	if err != nil {
		return nil, fmt.Errorf("pkcs8: %w", err)
	}
	version, seq, err := derRead(seq, tagInteger)
	if err != nil {
		return nil, fmt.Errorf("pkcs8 version: %w", err)
	}
	if err := derCheckInt(version); err != nil {
		return nil, fmt.Errorf("pkcs8 version: %w", err)
	}
	algo, seq, err := derRead(seq, tagSequence)
	if err != nil {
		return nil, fmt.Errorf("pkcs8 algorithm: %w", err)
	}
	if err := checkAlgo(algo); err != nil {
		return nil, err
	}
	wrapped, _, err := derRead(seq, tagOctetString)
	if err != nil {
		return nil, fmt.Errorf("pkcs8 private key: %w", err)
	}
	seed, _, err := derRead(wrapped, tagOctetString)
	if err != nil {
		return nil, fmt.Errorf("pkcs8 private key: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("invalid ed25519 private key length: %d", len(seed))
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// parsePKIX reads a SubjectPublicKeyInfo as x509.ParsePKIXPublicKey does:
// SEQUENCE { AlgorithmIdentifier, BIT STRING key ...}, nothing after the
// sequence. A key of another algorithm is errNotEd25519.
func parsePKIX(der []byte) (ed25519.PublicKey, error) {
	seq, rest, err := derRead(der, tagSequence)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(rest) > 0 {
		return nil, errors.New("trailing data after the public key")
	}
	algo, seq, err := derRead(seq, tagSequence)
	if err != nil {
		return nil, fmt.Errorf("public key algorithm: %w", err)
	}
	if err := checkAlgo(algo); err != nil {
		return nil, err
	}
	bits, _, err := derRead(seq, tagBitString)
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	if len(bits) == 0 {
		return nil, errors.New("empty bit string")
	}
	// Unused bits, as encoding/asn1 reads them: at most 7, zero, and the
	// key is the bits right-aligned (BitString.RightAlign).
	pad, data := bits[0], bits[1:]
	if pad > 7 || len(data) == 0 && pad > 0 || len(data) > 0 && data[len(data)-1]&(1<<pad-1) != 0 {
		return nil, errors.New("invalid padding bits in bit string")
	}
	if len(data) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("invalid ed25519 public key length: %d bytes", len(data))
	}
	key := make([]byte, len(data))
	if pad == 0 {
		copy(key, data)
	} else {
		key[0] = data[0] >> pad
		for i := 1; i < len(data); i++ {
			key[i] = data[i-1]<<(8-pad) | data[i]>>pad
		}
	}
	return ed25519.PublicKey(key), nil
}

// checkAlgo checks the body of an AlgorithmIdentifier: the Ed25519 OID and
// no parameters.
func checkAlgo(algo []byte) error {
	oid, params, err := derRead(algo, tagOID)
	if err != nil {
		return fmt.Errorf("key algorithm: %w", err)
	}
	if string(oid) != string(derEd25519OID) {
		return errNotEd25519
	}
	if len(params) > 0 {
		return errors.New("ed25519 key with algorithm parameters")
	}
	return nil
}

// derRead reads one DER value with the given tag (a one-byte tag and a
// minimal definite length, as encoding/asn1 demands) and returns its body
// and the bytes after it.
func derRead(b []byte, tag byte) (body, rest []byte, err error) {
	if len(b) < 2 {
		return nil, nil, errors.New("truncated DER value")
	}
	if b[0] != tag {
		return nil, nil, fmt.Errorf("DER tag %#x, want %#x", b[0], tag)
	}
	n, b := int(b[1]), b[2:]
	if n&0x80 != 0 {
		k := n & 0x7f
		if k == 0 || k > 3 || len(b) < k || b[0] == 0 {
			return nil, nil, errors.New("bad DER length")
		}
		n = 0
		for _, c := range b[:k] {
			n = n<<8 | int(c)
		}
		if n < 0x80 {
			return nil, nil, errors.New("non-minimal DER length")
		}
		b = b[k:]
	}
	if n > len(b) {
		return nil, nil, errors.New("truncated DER value")
	}
	return b[:n], b[n:], nil
}

// derCheckInt checks an INTEGER's body as encoding/asn1 does for an int
// field: present, minimally encoded, at most 32 bits.
func derCheckInt(b []byte) error {
	switch {
	case len(b) == 0:
		return errors.New("empty integer")
	case len(b) > 1 && (b[0] == 0 && b[1]&0x80 == 0 || b[0] == 0xff && b[1]&0x80 != 0):
		return errors.New("integer not minimally encoded")
	case len(b) > 4:
		return errors.New("integer too large")
	}
	return nil
}

// der appends the DER encoding of tag and body to out.
func der(out []byte, tag byte, body ...[]byte) []byte {
	n := 0
	for _, p := range body {
		n += len(p)
	}
	out = append(out, tag)
	switch {
	case n < 0x80:
		out = append(out, byte(n))
	case n < 0x100:
		out = append(out, 0x81, byte(n))
	default:
		out = append(out, 0x82, byte(n>>8), byte(n))
	}
	for _, p := range body {
		out = append(out, p...)
	}
	return out
}

// selfSignedCert is the certificate NewIdentity made with
// x509.CreateCertificate: version 3, serial 1, subject and issuer
// CN=cn, valid from the Unix epoch to 9999-12-31, the key usage
// digitalSignature (critical) and the extended key usages serverAuth and
// clientAuth, signed with priv.
func selfSignedCert(priv ed25519.PrivateKey, cn string) []byte {
	strTag := byte(tagPrintable)
	for i := 0; i < len(cn); i++ {
		if !printable(cn[i]) {
			strTag = tagUTF8String
			break
		}
	}
	var rdn []byte // crypto/x509 writes an empty CN as no attribute
	if cn != "" {
		rdn = der(nil, tagSet, der(nil, tagSequence,
			[]byte{tagOID, 0x03, 0x55, 0x04, 0x03}, // 2.5.4.3 commonName
			der(nil, strTag, []byte(cn))))
	}
	name := der(nil, tagSequence, rdn)
	keyUsage := der(nil, tagSequence,
		[]byte{tagOID, 0x03, 0x55, 0x1d, 0x0f},                           // 2.5.29.15 keyUsage
		[]byte{tagBoolean, 0x01, 0xff},                                   // critical
		der(nil, tagOctetString, []byte{tagBitString, 0x02, 0x07, 0x80})) // digitalSignature
	extKeyUsage := der(nil, tagSequence,
		[]byte{tagOID, 0x03, 0x55, 0x1d, 0x25}, // 2.5.29.37 extKeyUsage
		der(nil, tagOctetString, der(nil, tagSequence,
			[]byte{tagOID, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01},   // serverAuth
			[]byte{tagOID, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02}))) // clientAuth
	tbs := der(nil, tagSequence,
		[]byte{0xa0, 0x03, tagInteger, 0x01, 0x02}, // [0] version v3
		[]byte{tagInteger, 0x01, 0x01},             // serial 1
		derEd25519Algo,
		name,
		der(nil, tagSequence,
			der(nil, tagUTCTime, []byte("700101000000Z")),
			der(nil, tagGenTime, []byte("99991231000000Z"))),
		name,
		marshalPKIX(priv.Public().(ed25519.PublicKey)),
		der(nil, 0xa3, der(nil, tagSequence, keyUsage, extKeyUsage))) // [3] extensions
	sig := ed25519.Sign(priv, tbs)
	return der(nil, tagSequence, tbs, derEd25519Algo, der(nil, tagBitString, []byte{0}, sig))
}

// printable is the PrintableString alphabet, in which encoding/asn1
// writes a string that fits it (else as a UTF8String).
func printable(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		'\'' <= c && c <= ')' || '+' <= c && c <= '/' || c == ' ' || c == ':' || c == '=' || c == '?'
}
