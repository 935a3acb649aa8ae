package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// MasterPinFile is the file in an agent's pki_dir that holds the master's
// public key pinned on first use (Salt's minion_master.pub): the agent
// writes and checks it, and a relay checks its upstream master against the
// key its own agent session pinned there.
const MasterPinFile = "minion_master.pub"

// Identity is a peer's long-lived ed25519 key pair and the TLS certificate
// bound to it.
type Identity struct {
	Priv ed25519.PrivateKey
	Pub  ed25519.PublicKey
	cert tls.Certificate
}

// NewIdentity returns an identity for an existing private key.
func NewIdentity(priv ed25519.PrivateKey) (*Identity, error) {
	if len(priv) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("make certificate: ed25519 private key of %d bytes", len(priv))
	}
	id := &Identity{Priv: priv, Pub: priv.Public().(ed25519.PublicKey)}
	// The self-signed certificate crypto/x509's CreateCertificate made
	// (see der.go): serial 1, CN "halite <fingerprint>", 1970 to 9999,
	// digitalSignature, serverAuth and clientAuth.
	cert := selfSignedCert(priv, "halite "+Fingerprint(id.Pub))
	id.cert = tls.Certificate{Certificate: [][]byte{cert}, PrivateKey: priv}
	return id, nil
}

// GenerateIdentity makes a new random identity (tests, simulators).
func GenerateIdentity() (*Identity, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return NewIdentity(priv)
}

// LoadOrCreateIdentity reads dir/name.pem, or makes a new key pair and writes
// dir/name.pem (mode 0600) and dir/name.pub. created says which happened.
func LoadOrCreateIdentity(dir, name string) (id *Identity, created bool, err error) {
	priv, created, err := LoadOrCreateKey(dir, name)
	if err != nil {
		return nil, false, err
	}
	id, err = NewIdentity(priv)
	return id, created, err
}

// LoadOrCreateKey is LoadOrCreateIdentity without the identity's TLS
// certificate, for a key that only signs (a relay's proxy minions: a
// thousand certificates made at start would be a thousand signatures, and
// their garbage, for nothing).
func LoadOrCreateKey(dir, name string) (priv ed25519.PrivateKey, created bool, err error) {
	privPath := filepath.Join(dir, name+".pem")
	b, err := os.ReadFile(privPath)
	switch {
	case err == nil:
		blk, _ := pem.Decode(b)
		if blk == nil || blk.Type != "PRIVATE KEY" {
			return nil, false, fmt.Errorf("read key %s: no PRIVATE KEY block", privPath)
		}
		priv, err := parsePKCS8(blk.Bytes)
		if err != nil {
			return nil, false, fmt.Errorf("read key %s: %w", privPath, err)
		}
		if len(priv) != ed25519.PrivateKeySize {
			return nil, false, fmt.Errorf("read key %s: ed25519 private key of %d bytes", privPath, len(priv))
		}
		return priv, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, false, fmt.Errorf("read key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("make key dir: %w", err)
	}
	_, priv, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generate key: %w", err)
	}
	if err := writeFileAtomic(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: marshalPKCS8(priv)}), 0o600); err != nil {
		return nil, false, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	if err := writeFileAtomic(filepath.Join(dir, name+".pub"), EncodePublicKey(pub), 0o644); err != nil {
		return nil, false, err
	}
	return priv, true, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// EncodePublicKey returns pub as a PEM "PUBLIC KEY" block.
func EncodePublicKey(pub ed25519.PublicKey) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: marshalPKIX(pub)})
}

// ParsePublicKey reads a PEM "PUBLIC KEY" block holding an ed25519 key.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(bytes.TrimSpace(b))
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("no PUBLIC KEY block")
	}
	pub, err := parsePKIX(blk.Bytes)
	if errors.Is(err, errNotEd25519) {
		return nil, errors.New("not an ed25519 public key")
	}
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	return pub, nil
}

// Fingerprint names a public key: the SHA-256 of its 32 bytes as
// colon-separated hex pairs, as salt-key prints fingerprints.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	h := hex.EncodeToString(sum[:])
	out := make([]byte, 0, len(h)+len(h)/2)
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			out = append(out, ':')
		}
		out = append(out, h[i], h[i+1])
	}
	return string(out)
}

// SameFingerprint compares two fingerprints, ignoring case and colons.
func SameFingerprint(a, b string) bool {
	norm := func(s string) string {
		out := make([]byte, 0, len(s))
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == ':' {
				continue
			}
			if 'A' <= c && c <= 'F' {
				c += 'a' - 'A'
			}
			out = append(out, c)
		}
		return string(out)
	}
	return norm(a) == norm(b)
}

// ServerTLS is the TLS configuration of a listener: TLS 1.3, Halite's ALPN,
// and a client certificate required (any key; the application decides what
// to do with it).
func (id *Identity) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{id.cert},
		NextProtos:       []string{ALPN},
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: verifyPeer(nil),
	}
}

// clientCurves are the key exchanges a dialer offers, in order: the hybrid
// post-quantum X25519MLKEM768 and X25519 (each Go peer's first choices,
// whose key shares the first ClientHello carries) and P-256. P-384 and
// P-521 are left out on purpose: the 32-bit ARM and MIPS agent is built
// without their arithmetic (third_party/gotrim/HALITE.md), so a server
// must not be able to steer it to them with a HelloRetryRequest.
var clientCurves = []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256}

// ClientTLS is the TLS configuration of a dialer: TLS 1.3 only (MinVersion
// and MaxVersion), the key exchanges of clientCurves, and the TLS 1.3
// cipher suites, which Go does not let a Config choose (AES-128-GCM,
// AES-256-GCM, ChaCha20-Poly1305). pin is called with the server's public
// key during the handshake; an error from it aborts the connection.
func (id *Identity) ClientTLS(pin func(ed25519.PublicKey) error) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		CurvePreferences:   slices.Clone(clientCurves),
		Certificates:       []tls.Certificate{id.cert},
		NextProtos:         []string{ALPN},
		InsecureSkipVerify: true, // the peer is verified by key, in VerifyConnection
		VerifyConnection:   verifyPeer(pin),
		ServerName:         "halite",
	}
}

// verifyPeer checks the peer's certificate once the handshake has parsed
// it: exactly one, with an ed25519 key, which pin (if not nil) accepts. The
// certificate's own signature is not checked: it is self-signed, so it
// proves only that the peer holds the key, which TLS's CertificateVerify,
// made with that key over this handshake, proves already (and a failed one
// ends the handshake). Not checking it saves an ed25519 verification per
// handshake on each side, which a relay's reconnect storm pays ten
// thousand times.
func verifyPeer(pin func(ed25519.PublicKey) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		pub, err := PeerKey(cs)
		if err != nil {
			return err
		}
		if pin != nil {
			return pin(pub)
		}
		return nil
	}
}

// PeerKey returns the ed25519 key of the peer of a finished handshake.
func PeerKey(cs tls.ConnectionState) (ed25519.PublicKey, error) {
	if len(cs.PeerCertificates) != 1 {
		return nil, fmt.Errorf("peer presented %d certificates, want 1", len(cs.PeerCertificates))
	}
	pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, errors.New("peer key is not ed25519")
	}
	return pub, nil
}
