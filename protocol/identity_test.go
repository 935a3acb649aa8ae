package protocol

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki", "agent")
	id, created, err := LoadOrCreateIdentity(dir, "agent")
	if err != nil {
		t.Fatalf("LoadOrCreateIdentity (create): %v", err)
	}
	if !created {
		t.Errorf("created: got false, want true for a new key")
	}
	for _, tc := range []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{filepath.Join(dir, "agent.pem"), 0o600},
		{filepath.Join(dir, "agent.pub"), 0o644},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() &^ 0o022 & (os.ModeDir | os.ModePerm); got != tc.mode&^0o022 {
			t.Errorf("mode of %s: got %v, want %v", tc.path, fi.Mode(), tc.mode)
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "agent.pem")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode of agent.pem: got %v, want 0600", fi.Mode().Perm())
	}
	pubPEM, err := os.ReadFile(filepath.Join(dir, "agent.pub"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatalf("ParsePublicKey(agent.pub): %v", err)
	}
	if !pub.Equal(id.Pub) {
		t.Errorf("agent.pub holds %s, want %s", Fingerprint(pub), Fingerprint(id.Pub))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("key dir holds %d files, want 2 (no temporary files left)", len(entries))
	}

	again, created, err := LoadOrCreateIdentity(dir, "agent")
	if err != nil {
		t.Fatalf("LoadOrCreateIdentity (load): %v", err)
	}
	if created {
		t.Errorf("created: got true, want false for an existing key")
	}
	if !again.Priv.Equal(id.Priv) || !again.Pub.Equal(id.Pub) {
		t.Errorf("reloaded key %s, want %s", Fingerprint(again.Pub), Fingerprint(id.Pub))
	}
}

func TestLoadIdentityCorrupt(t *testing.T) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no PRIVATE KEY block"},
		{"not pem", []byte("hello"), "no PRIVATE KEY block"},
		{"wrong block", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}}), "no PRIVATE KEY block"},
		{"bad der", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}), "read key"},
		{"ecdsa key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), "not an ed25519 key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "k.pem"), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			id, created, err := LoadOrCreateIdentity(dir, "k")
			if err == nil {
				t.Fatalf("LoadOrCreateIdentity = %v, %v, want error", id, created)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error: got %q, want it to contain %q", err, tc.want)
			}
			// The corrupt key is left alone, never replaced by a new one.
			if b, _ := os.ReadFile(filepath.Join(dir, "k.pem")); !bytes.Equal(b, tc.data) {
				t.Errorf("k.pem was rewritten")
			}
		})
	}
}

func TestPublicKeyPEM(t *testing.T) {
	pub, _ := newKey(t)
	got, err := ParsePublicKey(append(append([]byte("\n  "), EncodePublicKey(pub)...), "\n\n"...))
	if err != nil {
		t.Fatalf("ParsePublicKey(EncodePublicKey): %v", err)
	}
	if !got.Equal(pub) {
		t.Errorf("ParsePublicKey(EncodePublicKey(k)) != k")
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	for name, in := range map[string][]byte{
		"empty":       nil,
		"private key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}),
		"bad der":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}}),
		"ecdsa":       pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER}),
	} {
		if k, err := ParsePublicKey(in); err == nil {
			t.Errorf("ParsePublicKey(%s) = %x, want error", name, k)
		}
	}
}

func TestFingerprint(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	fp := Fingerprint(pub)
	if !regexp.MustCompile(`^([0-9a-f]{2}:){31}[0-9a-f]{2}$`).MatchString(fp) {
		t.Errorf("Fingerprint: got %q, want 32 colon-separated lowercase hex pairs", fp)
	}
	sum := sha256.Sum256(pub)
	if got, want := strings.ReplaceAll(fp, ":", ""), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint without colons: got %s, want sha256 of the key %s", got, want)
	}
	other, _ := newKey(t)
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{fp, fp, true},
		{fp, strings.ToUpper(fp), true},
		{fp, strings.ReplaceAll(fp, ":", ""), true},
		{strings.ToUpper(strings.ReplaceAll(fp, ":", "")), fp, true},
		{fp, Fingerprint(other), false},
		{fp, fp[:len(fp)-3], false},
		{fp, fp + ":00", false},
		{fp, "", false},
	} {
		if got := SameFingerprint(tc.a, tc.b); got != tc.want {
			t.Errorf("SameFingerprint(%q, %q): got %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// handshake runs a TLS handshake over loopback TCP (kernel buffers, so
// neither side blocks writing an alert the other never reads) and returns
// both ends' connection states and errors.
func handshake(t *testing.T, server, client *tls.Config) (srv, cli tls.ConnectionState, srvErr, cliErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			srvErr = err
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		s := tls.Server(c, server)
		srvErr = s.Handshake()
		srv = s.ConnectionState()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	tc := tls.Client(c, client)
	cliErr = tc.Handshake()
	cli = tc.ConnectionState()
	<-done
	return srv, cli, srvErr, cliErr
}

func TestTLSHandshake(t *testing.T) {
	srvID, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cliID, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	var pinned ed25519.PublicKey
	srv, cli, srvErr, cliErr := handshake(t, srvID.ServerTLS(), cliID.ClientTLS(func(k ed25519.PublicKey) error {
		pinned = k
		return nil
	}))
	if srvErr != nil || cliErr != nil {
		t.Fatalf("handshake: server %v, client %v", srvErr, cliErr)
	}
	if !pinned.Equal(srvID.Pub) {
		t.Errorf("pin saw key %s, want the server's %s", Fingerprint(pinned), Fingerprint(srvID.Pub))
	}
	got, err := PeerKey(srv)
	if err != nil {
		t.Fatalf("PeerKey(server side): %v", err)
	}
	if !got.Equal(cliID.Pub) {
		t.Errorf("server learnt key %s, want the client's %s", Fingerprint(got), Fingerprint(cliID.Pub))
	}
	got, err = PeerKey(cli)
	if err != nil {
		t.Fatalf("PeerKey(client side): %v", err)
	}
	if !got.Equal(srvID.Pub) {
		t.Errorf("client learnt key %s, want the server's %s", Fingerprint(got), Fingerprint(srvID.Pub))
	}
	if srv.Version != tls.VersionTLS13 || srv.NegotiatedProtocol != ALPN {
		t.Errorf("server state: got version %x ALPN %q, want TLS 1.3 and %q", srv.Version, srv.NegotiatedProtocol, ALPN)
	}
}

func TestTLSPinRefuses(t *testing.T) {
	srvID, _ := GenerateIdentity()
	cliID, _ := GenerateIdentity()
	errPin := errors.New("master key does not match master_finger")
	_, _, srvErr, cliErr := handshake(t, srvID.ServerTLS(), cliID.ClientTLS(func(ed25519.PublicKey) error { return errPin }))
	if !errors.Is(cliErr, errPin) {
		t.Errorf("client handshake: got %v, want the pin error", cliErr)
	}
	if srvErr == nil {
		t.Errorf("server handshake: got success, want failure after the client's pin refused")
	}
}

func TestTLSRefusesBadClients(t *testing.T) {
	srvID, _ := GenerateIdentity()
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Unix(0, 0), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]*tls.Config{
		"no certificate": {MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN}, InsecureSkipVerify: true},
		"ecdsa certificate": {MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN}, InsecureSkipVerify: true,
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: ecKey}}},
		"tls 1.2": {MaxVersion: tls.VersionTLS12, NextProtos: []string{ALPN}, InsecureSkipVerify: true,
			Certificates: []tls.Certificate{srvID.cert}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, srvErr, _ := handshake(t, srvID.ServerTLS(), cfg)
			if srvErr == nil {
				t.Errorf("server handshake with %s: got success, want failure", name)
			}
		})
	}
}

func TestPeerKeyErrors(t *testing.T) {
	if _, err := PeerKey(tls.ConnectionState{}); err == nil {
		t.Errorf("PeerKey(no certificates): got no error, want one")
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{{PublicKey: &ecKey.PublicKey}}}
	if _, err := PeerKey(cs); err == nil {
		t.Errorf("PeerKey(ecdsa certificate): got no error, want one")
	}
}

// TestClientTLSDeviceSafe: a dialer's TLS is TLS 1.3 only and offers only
// key exchanges the 32-bit ARM and MIPS agent has (third_party/gotrim: no
// P-384 or P-521 arithmetic there), so no server can steer it into one it
// lacks; each Config gets its own copy of the list.
func TestClientTLSDeviceSafe(t *testing.T) {
	id, err := GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c := id.ClientTLS(nil)
	if c.MinVersion != tls.VersionTLS13 || c.MaxVersion != tls.VersionTLS13 {
		t.Errorf("versions %x..%x, want TLS 1.3 only", c.MinVersion, c.MaxVersion)
	}
	want := []tls.CurveID{tls.X25519MLKEM768, tls.X25519, tls.CurveP256}
	if len(c.CurvePreferences) != len(want) {
		t.Fatalf("CurvePreferences %v, want %v", c.CurvePreferences, want)
	}
	for i := range want {
		if c.CurvePreferences[i] != want[i] {
			t.Errorf("CurvePreferences %v, want %v", c.CurvePreferences, want)
		}
	}
	c.CurvePreferences[0] = tls.CurveP384
	if got := id.ClientTLS(nil).CurvePreferences[0]; got != tls.X25519MLKEM768 {
		t.Errorf("after changing one Config's list, the next one starts with %v", got)
	}
}
