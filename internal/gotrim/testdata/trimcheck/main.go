// Command trimcheck runs, built with the gotrim overlay, what the device
// agent's trimmed standard library must still do and what it must refuse
// without panicking. It prints "ok NAME DETAIL" per check that passed and
// "FAIL NAME: WHY" per one that did not, and exits 1 after a failure.
// internal/gotrim's TestTrimmedCrypto builds and runs it, natively and
// under qemu-arm, against servers of an untrimmed Go.
package main

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/mlkem"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

var (
	failed bool
	only   = flag.String("run", "", "run only the checks whose names match this regexp")
)

func check(name string, f func() (string, error)) {
	if *only != "" && !regexp.MustCompile(*only).MatchString(name) {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			failed = true
			fmt.Printf("FAIL %s: panic: %v\n", name, r)
		}
	}()
	detail, err := f()
	if err != nil {
		failed = true
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	fmt.Printf("ok %s %s\n", name, detail)
}

// wantErr passes when err says want.
func wantErr(err error, want string) (string, error) {
	if err == nil {
		return "", fmt.Errorf("no error, want one saying %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		return "", fmt.Errorf("error %q, want one saying %q", err, want)
	}
	return fmt.Sprintf("%q", err.Error()), nil
}

const (
	noP384 = "P-384 is not in the Halite device build"
	noP521 = "P-521 is not in the Halite device build"
	noRSA  = "RSA is not in the Halite device build"
	noTLS  = "TLS 1.0–1.2 is not in the Halite device build"
)

// pipeHandshake runs a TLS handshake between client and server configs
// over loopback TCP (net.Pipe, unbuffered, can deadlock a
// HelloRetryRequest) and returns what the client saw and both errors.
func pipeHandshake(client, server *tls.Config) (tls.ConnectionState, error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return tls.ConnectionState{}, err, err
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		srvErr <- tls.Server(conn, server).Handshake()
	}()
	cs, err := dial(ln.Addr().String(), client)
	return cs, err, <-srvErr
}

// dial runs a client handshake against a server at addr.
func dial(addr string, conf *tls.Config) (tls.ConnectionState, error) {
	conn, err := net.DialTimeout("tcp", addr, 20*time.Second)
	if err != nil {
		return tls.ConnectionState{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := tls.Client(conn, conf)
	err = c.Handshake()
	return c.ConnectionState(), err
}

func describe(cs tls.ConnectionState) string {
	return fmt.Sprintf("version=%s curve=%s suite=%s", tls.VersionName(cs.Version), cs.CurveID, tls.CipherSuiteName(cs.CipherSuite))
}

func main() {
	tls12 := flag.String("tls12", "", "address of a TLS 1.2 server of an untrimmed Go")
	tls13 := flag.String("tls13", "", "address of a Halite TLS 1.3 server of an untrimmed Go")
	p384 := flag.String("p384", "", "address of a TLS 1.3 server of an untrimmed Go that takes P-384 only")
	p384Cert := flag.String("p384-cert", "", "DER file of a certificate with a P-384 key")
	rsaCert := flag.String("rsa-cert", "", "DER file of a self-signed RSA certificate")
	rsaServer := flag.String("rsa-server", "", "address of a TLS 1.3 server of an untrimmed Go with an RSA certificate")
	p384Server := flag.String("p384-cert-server", "", "address of a TLS 1.3 server of an untrimmed Go with a P-384 certificate")
	flag.Parse()

	clientID, err := protocol.GenerateIdentity()
	if err != nil {
		fmt.Println("FAIL identity:", err)
		os.Exit(1)
	}
	serverID, err := protocol.GenerateIdentity()
	if err != nil {
		fmt.Println("FAIL identity:", err)
		os.Exit(1)
	}
	halite := func(curves ...tls.CurveID) (string, error) {
		srv := serverID.ServerTLS()
		srv.CurvePreferences = curves
		cs, err, serr := pipeHandshake(clientID.ClientTLS(nil), srv)
		if err != nil || serr != nil {
			return "", fmt.Errorf("client %v, server %v", err, serr)
		}
		want := tls.X25519MLKEM768
		if len(curves) > 0 {
			want = curves[0]
		}
		if cs.Version != tls.VersionTLS13 || cs.CurveID != want {
			return "", fmt.Errorf("%s, want TLS 1.3 with %s", describe(cs), want)
		}
		return describe(cs), nil
	}

	// What remains.
	check("tls13-mlkem", func() (string, error) { return halite() })
	check("tls13-x25519", func() (string, error) { return halite(tls.X25519) })
	check("tls13-p256", func() (string, error) { return halite(tls.CurveP256) })
	check("ed25519", func() (string, error) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return "", err
		}
		if !ed25519.Verify(pub, []byte("m"), ed25519.Sign(priv, []byte("m"))) {
			return "", errors.New("signature does not verify")
		}
		return "sign+verify", nil
	})
	check("ecdsa-p256", func() (string, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", err
		}
		h := sha256.Sum256([]byte("m"))
		sig, err := ecdsa.SignASN1(rand.Reader, k, h[:])
		if err != nil {
			return "", err
		}
		if !ecdsa.VerifyASN1(&k.PublicKey, h[:], sig) {
			return "", errors.New("signature does not verify")
		}
		return "sign+verify", nil
	})
	check("ecdh-p256", func() (string, error) {
		a, _ := ecdh.P256().GenerateKey(rand.Reader)
		b, err := ecdh.P256().GenerateKey(rand.Reader)
		if err != nil {
			return "", err
		}
		s1, err := a.ECDH(b.PublicKey())
		if err != nil {
			return "", err
		}
		s2, _ := b.ECDH(a.PublicKey())
		if string(s1) != string(s2) {
			return "", errors.New("shared secrets differ")
		}
		return "agree", nil
	})
	check("mlkem768", func() (string, error) {
		dk, err := mlkem.GenerateKey768()
		if err != nil {
			return "", err
		}
		shared, ct := dk.EncapsulationKey().Encapsulate()
		got, err := dk.Decapsulate(ct)
		if err != nil || string(got) != string(shared) {
			return "", fmt.Errorf("decapsulate: %v", err)
		}
		return "encaps+decaps", nil
	})

	// What is refused, with an error and without a panic.
	check("tls13-server-p384-only", func() (string, error) {
		srv := serverID.ServerTLS()
		srv.CurvePreferences = []tls.CurveID{tls.CurveP384}
		_, err, serr := pipeHandshake(clientID.ClientTLS(nil), srv)
		if err == nil {
			return "", errors.New("handshake succeeded: the client offered P-384")
		}
		return wantErr(serr, "no key exchanges supported by both client and server")
	})
	check("tls13-client-p384", func() (string, error) {
		conf := clientID.ClientTLS(nil)
		conf.CurvePreferences = []tls.CurveID{tls.CurveP384}
		_, err, _ := pipeHandshake(conf, serverID.ServerTLS())
		return wantErr(err, noP384)
	})
	check("tls12-in-process", func() (string, error) {
		srv := serverID.ServerTLS()
		srv.MinVersion = tls.VersionTLS12
		srv.MaxVersion = tls.VersionTLS12
		conf := clientID.ClientTLS(nil)
		conf.MinVersion = tls.VersionTLS12
		conf.MaxVersion = tls.VersionTLS12
		_, err, serr := pipeHandshake(conf, srv)
		if err == nil {
			return "", errors.New("TLS 1.2 handshake succeeded")
		}
		return wantErr(serr, noTLS)
	})
	check("ecdsa-p384", func() (string, error) {
		_, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
		return wantErr(err, noP384)
	})
	check("ecdh-p384", func() (string, error) {
		_, err := ecdh.P384().GenerateKey(rand.Reader)
		return wantErr(err, noP384)
	})
	check("ecdh-p521-public", func() (string, error) {
		_, err := ecdh.P521().NewPublicKey(append([]byte{4}, make([]byte, 132)...))
		return wantErr(err, "")
	})
	check("ecdsa-p521", func() (string, error) {
		_, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
		return wantErr(err, noP521)
	})
	check("rsa-generate", func() (string, error) {
		_, err := rsa.GenerateKey(rand.Reader, 2048)
		return wantErr(err, noRSA)
	})
	if *p384Cert != "" {
		check("x509-p384", func() (string, error) {
			der, err := os.ReadFile(*p384Cert)
			if err != nil {
				return "", err
			}
			_, err = x509.ParseCertificate(der)
			return wantErr(err, noP384)
		})
	}
	if *rsaCert != "" {
		check("x509-rsa-verify", func() (string, error) {
			der, err := os.ReadFile(*rsaCert)
			if err != nil {
				return "", err
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				return "", fmt.Errorf("parse: %w", err)
			}
			return wantErr(cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature), noRSA)
		})
	}
	if *tls13 != "" {
		check("tls13-untrimmed-server", func() (string, error) {
			cs, err := dial(*tls13, clientID.ClientTLS(nil))
			if err != nil {
				return "", err
			}
			if cs.Version != tls.VersionTLS13 || cs.CurveID != tls.X25519MLKEM768 {
				return "", fmt.Errorf("%s, want TLS 1.3 with X25519MLKEM768", describe(cs))
			}
			return describe(cs), nil
		})
	}
	if *tls12 != "" {
		check("tls12-untrimmed-server", func() (string, error) {
			_, err := dial(*tls12, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true})
			return wantErr(err, noTLS)
		})
		check("tls12-halite-client", func() (string, error) {
			_, err := dial(*tls12, clientID.ClientTLS(nil))
			return wantErr(err, "protocol version")
		})
	}
	if *p384 != "" {
		check("tls13-untrimmed-server-p384-only", func() (string, error) {
			_, err := dial(*p384, clientID.ClientTLS(nil))
			return wantErr(err, "handshake failure")
		})
	}
	if *rsaServer != "" {
		check("tls13-rsa-certificate", func() (string, error) {
			_, err := dial(*rsaServer, clientID.ClientTLS(nil))
			return wantErr(err, "peer key is not ed25519")
		})
	}
	if *p384Server != "" {
		check("tls13-p384-certificate", func() (string, error) {
			_, err := dial(*p384Server, clientID.ClientTLS(nil))
			return wantErr(err, noP384)
		})
	}
	if failed {
		os.Exit(1)
	}
}
