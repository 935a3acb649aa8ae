package gotrim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// selfSigned returns a self-signed certificate for key.
func selfSigned(t *testing.T, key any, pub any) tls.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "trimcheck"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"halite"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serve answers TLS handshakes with conf on a loopback listener (this
// process's Go is not trimmed) until the test ends.
func serve(t *testing.T, conf *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				c.(*tls.Conn).Handshake()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestTrimmedCrypto builds testdata/trimcheck with the overlay and runs it
// natively and, where qemu-arm is installed, as the armv7 device runs it:
// TLS 1.3 with X25519MLKEM768, X25519 and P-256, AES-GCM (amd64) and
// ChaCha20-Poly1305 (ARM, no AES instructions), Ed25519, ECDSA and ECDH on
// P-256 and ML-KEM still work, against itself and an untrimmed Go; P-384,
// P-521, RSA and TLS 1.2 fail with errors that say so, not panics. In FIPS
// mode (a test run only: the device build does not turn it on) the
// self-tests of what remains pass.
func TestTrimmedCrypto(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the overlay")
	}
	dir := t.TempDir()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384Cert := filepath.Join(dir, "p384.der")
	os.WriteFile(p384Cert, selfSigned(t, p384, &p384.PublicKey).Certificate[0], 0o644)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaCert := filepath.Join(dir, "rsa.der")
	os.WriteFile(rsaCert, selfSigned(t, rsaKey, &rsaKey.PublicKey).Certificate[0], 0o644)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tls12 := serve(t, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{selfSigned(t, p256, &p256.PublicKey)}})
	id, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	tls13 := serve(t, id.ServerTLS())
	p384Only := id.ServerTLS()
	p384Only.CurvePreferences = []tls.CurveID{tls.CurveP384}
	p384Srv := serve(t, p384Only)
	rsaSrv := serve(t, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{selfSigned(t, rsaKey, &rsaKey.PublicKey)}})
	p384CertSrv := serve(t, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{selfSigned(t, p384, &p384.PublicKey)}})
	args := []string{"-tls12", tls12, "-tls13", tls13, "-p384", p384Srv, "-p384-cert", p384Cert, "-rsa-cert", rsaCert,
		"-rsa-server", rsaSrv, "-p384-cert-server", p384CertSrv}

	all := []string{"tls13-mlkem", "tls13-x25519", "tls13-p256", "ed25519", "ecdsa-p256", "ecdh-p256", "mlkem768",
		"tls13-server-p384-only", "tls13-client-p384", "tls12-in-process", "ecdsa-p384", "ecdh-p384",
		"ecdh-p521-public", "ecdsa-p521", "rsa-generate", "x509-p384", "x509-rsa-verify",
		"tls13-untrimmed-server", "tls12-untrimmed-server", "tls12-halite-client", "tls13-untrimmed-server-p384-only",
		"tls13-rsa-certificate", "tls13-p384-certificate"}
	run := func(t *testing.T, name string, cmd *exec.Cmd, want []string, suite string) string {
		t.Helper()
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", name, out)
		if err != nil || strings.Contains(string(out), "FAIL ") || strings.Contains(string(out), "panic") {
			t.Fatalf("%s: %v (FAIL lines above)", name, err)
		}
		for _, w := range want {
			if !strings.Contains(string(out), "\nok "+w+" ") && !strings.HasPrefix(string(out), "ok "+w+" ") {
				t.Errorf("%s: no \"ok %s\" line", name, w)
			}
		}
		if suite != "" && !strings.Contains(string(out), "ok tls13-mlkem version=TLS 1.3 curve=X25519MLKEM768 suite="+suite) {
			t.Errorf("%s: tls13-mlkem did not use %s", name, suite)
		}
		return string(out)
	}

	t.Run("native", func(t *testing.T) {
		bin := trimcheck(t, "amd64")
		if out, err := exec.Command("go", "env", "GOARCH").Output(); err != nil || strings.TrimSpace(string(out)) != "amd64" {
			t.Skipf("runs the amd64 build natively; this is %s", out)
		}
		run(t, "trimcheck", exec.Command(bin, args...), all, "TLS_AES_128_GCM_SHA256")

		// FIPS mode turned on for this run only: the integrity check and
		// the self-tests (CASTs) of what the trims keep pass.
		cmd := exec.Command(bin, append([]string{"-run", "^(tls13-mlkem|tls13-p256|ed25519|ecdsa-p256|ecdh-p256|mlkem768|rsa-generate)$"}, args...)...)
		cmd.Env = append(os.Environ(), "GODEBUG=fips140=debug")
		out := run(t, "trimcheck in FIPS mode", cmd, []string{"tls13-mlkem", "ecdsa-p256", "rsa-generate"}, "")
		for _, cast := range []string{"fips140: verified code+data", "passed: ML-KEM-768", "passed: Ed25519 sign and verify",
			"passed: ECDSA P-256 SHA2-512 sign and verify", "passed: KAS-ECC-SSC P-256", "passed: TLSv1.3-SHA2-256", "passed: HKDF-SHA2-256"} {
			if !strings.Contains(out, cast) {
				t.Errorf("FIPS mode: no %q", cast)
			}
		}
	})
	t.Run("armv7", func(t *testing.T) {
		qemu, err := exec.LookPath("qemu-arm-static")
		if err != nil {
			if qemu, err = exec.LookPath("qemu-arm"); err != nil {
				t.Skip("qemu-arm is not installed (tools/ci/deps.sh installs it)")
			}
		}
		bin := trimcheck(t, "arm")
		run(t, "trimcheck under qemu-arm", exec.Command(qemu, append([]string{bin}, args...)...), all, "TLS_CHACHA20_POLY1305_SHA256")
	})
}
