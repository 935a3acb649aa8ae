package protocol

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"testing"
	"time"
)

// x509Cert is the certificate NewIdentity made with crypto/x509 before
// der.go: selfSignedCert must write the same bytes.
func x509Cert(t *testing.T, priv ed25519.PrivateKey, cn string) []byte {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, priv.Public(), priv)
	if err != nil {
		t.Fatalf("x509.CreateCertificate: %v", err)
	}
	return der
}

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// TestDERMatchesX509: what der.go writes is byte for byte what crypto/x509
// writes for the same ed25519 key.
func TestDERMatchesX509(t *testing.T) {
	for _, seed := range []byte{0, 1, 0x80, 0xff} {
		priv := testKey(seed)
		pub := priv.Public().(ed25519.PublicKey)
		want, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		if got := marshalPKCS8(priv); !bytes.Equal(got, want) {
			t.Errorf("seed %#x: marshalPKCS8 = %x, want %x", seed, got, want)
		}
		want, err = x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if got := marshalPKIX(pub); !bytes.Equal(got, want) {
			t.Errorf("seed %#x: marshalPKIX = %x, want %x", seed, got, want)
		}
		for _, cn := range []string{"halite " + Fingerprint(pub), "", "a*b", "a&b", "héllo", string(bytes.Repeat([]byte{'x'}, 300))} {
			if got, want := selfSignedCert(priv, cn), x509Cert(t, priv, cn); !bytes.Equal(got, want) {
				t.Errorf("seed %#x, CN %q: selfSignedCert =\n%x\nwant (x509.CreateCertificate)\n%x", seed, cn, got, want)
			}
		}
	}
	// The identity's certificate parses, and carries the identity's key.
	id, err := NewIdentity(testKey(7))
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(id.cert.Certificate[0])
	if err != nil {
		t.Fatalf("x509.ParseCertificate: %v", err)
	}
	if !id.Pub.Equal(c.PublicKey) {
		t.Errorf("certificate key = %v, want %x", c.PublicKey, id.Pub)
	}
	if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
		t.Errorf("self-signature: %v", err)
	}
}

// otherKeys are well-formed PKCS #8 and PKIX keys that are not ed25519.
func otherKeys(t testing.TB) (pkcs8, pkix [][]byte) {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []any{ec, x} {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		pkcs8 = append(pkcs8, b)
	}
	for _, k := range []any{ec.Public(), x.Public()} {
		b, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		pkix = append(pkix, b)
	}
	return pkcs8, pkix
}

// TestParseDER: the parsers accept what crypto/x509 accepts as an ed25519
// key and refuse the rest; a key of another algorithm is errNotEd25519.
func TestParseDER(t *testing.T) {
	priv := testKey(3)
	pub := priv.Public().(ed25519.PublicKey)
	p8 := marshalPKCS8(priv)
	// A version 2 key (RFC 8410 OneAsymmetricKey) with its public key
	// attached as [1]: the public key is ignored, as crypto/x509 does.
	v2 := append([]byte{0x30, 0x51, 0x02, 0x01, 0x01}, p8[5:]...)
	v2 = append(v2, 0x81, 0x21, 0x00)
	v2 = append(v2, pub...)
	withParams := append([]byte{0x30, 0x30, 0x02, 0x01, 0x00, 0x30, 0x07, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x05, 0x00}, p8[12:]...)
	otherP8, otherPKIX := otherKeys(t)
	pkcs8Cases := []struct {
		name string
		der  []byte
		ok   bool
	}{
		{"v1", p8, true},
		{"v2 with public key", v2, true},
		{"trailing bytes", append(append([]byte{}, p8...), 0, 0), true},
		{"parameters", withParams, false},
		{"truncated", p8[:len(p8)-1], false},
		{"short seed", append(append([]byte{0x30, 0x2d}, p8[2:14]...), append([]byte{0x04, 0x21, 0x04, 0x1f}, p8[16:47]...)...), false},
		{"empty", nil, false},
		{"ecdsa", otherP8[0], false},
		{"x25519", otherP8[1], false},
	}
	for _, tc := range pkcs8Cases {
		got, err := parsePKCS8(tc.der)
		k, xerr := x509.ParsePKCS8PrivateKey(tc.der)
		_, xok := k.(ed25519.PrivateKey)
		if (err == nil) != tc.ok || (xerr == nil && xok) != tc.ok {
			t.Errorf("pkcs8 %s: parsePKCS8 error %v, x509 (%T, %v); want ok=%v", tc.name, err, k, xerr, tc.ok)
			continue
		}
		if tc.ok && !got.Equal(priv) {
			t.Errorf("pkcs8 %s: got key %x, want %x", tc.name, got, priv)
		}
		if !tc.ok && xerr == nil && !errors.Is(err, errNotEd25519) {
			t.Errorf("pkcs8 %s: error %v, want errNotEd25519", tc.name, err)
		}
	}
	pk := marshalPKIX(pub)
	// Unused bits in the key's BIT STRING: crypto/x509 takes the bits
	// right-aligned (another key), and so does parsePKIX.
	padded := append([]byte{}, pk...)
	padded[11], padded[len(padded)-1] = 1, padded[len(padded)-1]&^1
	pkixCases := []struct {
		name string
		der  []byte
		ok   bool
	}{
		{"key", pk, true},
		{"padding bits", padded, true},
		{"nonzero padding bits", append(append([]byte{}, padded[:len(padded)-1]...), padded[len(padded)-1]|1), false},
		{"trailing bytes", append(append([]byte{}, pk...), 0), false},
		{"truncated", pk[:len(pk)-1], false},
		{"parameters", append([]byte{0x30, 0x2c, 0x30, 0x07, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x05, 0x00}, pk[9:]...), false},
		{"ecdsa", otherPKIX[0], false},
		{"x25519", otherPKIX[1], false},
	}
	for _, tc := range pkixCases {
		got, err := parsePKIX(tc.der)
		k, xerr := x509.ParsePKIXPublicKey(tc.der)
		_, xok := k.(ed25519.PublicKey)
		if (err == nil) != tc.ok || (xerr == nil && xok) != tc.ok {
			t.Errorf("pkix %s: parsePKIX error %v, x509 (%T, %v); want ok=%v", tc.name, err, k, xerr, tc.ok)
			continue
		}
		if tc.ok && !got.Equal(k) {
			t.Errorf("pkix %s: got key %x, want %x (x509)", tc.name, got, k)
		}
		if !tc.ok && xerr == nil && !errors.Is(err, errNotEd25519) {
			t.Errorf("pkix %s: error %v, want errNotEd25519", tc.name, err)
		}
	}
}

// FuzzKeyDER: whatever parsePKCS8 and parsePKIX accept, crypto/x509
// accepts as the same ed25519 key; and what crypto/x509 accepts as an
// ed25519 key, they accept.
func FuzzKeyDER(f *testing.F) {
	priv := testKey(9)
	p8 := marshalPKCS8(priv)
	pk := marshalPKIX(priv.Public().(ed25519.PublicKey))
	otherP8, otherPKIX := otherKeys(f)
	for _, b := range append(append([][]byte{p8, pk, p8[:20], pk[:20], {0x30, 0x80}, {0x30, 0x84, 0xff, 0xff, 0xff, 0xff}}, otherP8...), otherPKIX...) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parsePKCS8(b)
		k, xerr := x509.ParsePKCS8PrivateKey(b)
		xk, xok := k.(ed25519.PrivateKey)
		xok = xok && xerr == nil
		if err == nil && (!xok || !got.Equal(xk)) {
			t.Errorf("parsePKCS8(%x) = %x, but x509 says (%T, %v)", b, got, k, xerr)
		}
		if xok && err != nil {
			t.Errorf("parsePKCS8(%x): %v, but x509 reads an ed25519 key", b, err)
		}
		gotPub, err := parsePKIX(b)
		k, xerr = x509.ParsePKIXPublicKey(b)
		xpub, xok := k.(ed25519.PublicKey)
		xok = xok && xerr == nil
		if err == nil && (!xok || !gotPub.Equal(xpub)) {
			t.Errorf("parsePKIX(%x) = %x, but x509 says (%T, %v)", b, gotPub, k, xerr)
		}
		if xok && err != nil {
			t.Errorf("parsePKIX(%x): %v, but x509 reads an ed25519 key", b, err)
		}
	})
}
