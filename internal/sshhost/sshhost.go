package sshhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Checker checks devices' host keys against a known_hosts file. A host
// seen for the first time is recorded only when acceptNew is set; a host
// whose key differs from the recorded one is refused.
type Checker struct {
	file      string
	acceptNew bool

	mu sync.Mutex // the file is re-read for each check: lines appended by other devices count
}

// New returns a Checker of file, made (empty, mode 0600) if missing.
func New(file string, acceptNew bool) (*Checker, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	f.Close()
	if _, err := knownhosts.New(file); err != nil {
		return nil, fmt.Errorf("known_hosts %s: %w", file, err)
	}
	return &Checker{file: file, acceptNew: acceptNew}, nil
}

// Algorithms returns the host key algorithms recorded for addr, so that
// the server is asked for a key of a type we know (a server with an RSA
// and an ed25519 key must not look changed because it offered the other).
func (h *Checker) Algorithms(addr string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	cb, err := knownhosts.New(h.file)
	if err != nil {
		return nil
	}
	tcp, _ := net.ResolveTCPAddr("tcp", addr)
	var ke *knownhosts.KeyError
	if err := cb(addr, tcp, probeKey{}); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return defaultHostKeyAlgorithms
	}
	var algs []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			algs = append(algs, ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			algs = append(algs, t)
		}
	}
	return algs
}

// defaultHostKeyAlgorithms is the order asked of a host seen for the first
// time: ed25519 first. Dropbear offers RSA even when it has no RSA host key
// and then fails the handshake (dropbear 2022.83: "Failed assertion
// (rsa.c:164)"), so RSA comes last.
var defaultHostKeyAlgorithms = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA,
}

// probeKey is a key no host has, to list a host's recorded keys.
type probeKey struct{}

func (probeKey) Type() string                        { return "halite-probe" }
func (probeKey) Marshal() []byte                     { return []byte("halite-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error { return errors.New("probe key") }

// Error is a refused host key: unknown (not recorded, and new keys are
// not accepted) or Changed (another key is recorded for the host).
type Error struct {
	Changed bool
	host    string
	finger  string
	file    string
}

func (e *Error) Error() string {
	if e.Changed {
		return fmt.Sprintf("HOST KEY CHANGED for %s (now %s): refused. If the device was reinstalled on purpose, remove its line from %s (ssh-keygen -f %s -R '%s') and run again; otherwise someone may be in the middle", e.host, e.finger, e.file, e.file, e.host)
	}
	return fmt.Sprintf("host key of %s (%s) is not in %s: check it, then run again with --accept-new-hostkeys to record it", e.host, e.finger, e.file)
}

// Callback checks the key a device offers (an ssh.HostKeyCallback).
func (h *Checker) Callback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	cb, err := knownhosts.New(h.file)
	if err != nil {
		return fmt.Errorf("known_hosts %s: %w", h.file, err)
	}
	err = cb(hostname, remote, key)
	var ke *knownhosts.KeyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke) && len(ke.Want) > 0:
		return &Error{Changed: true, host: hostname, finger: ssh.FingerprintSHA256(key), file: h.file}
	case errors.As(err, &ke):
		if !h.acceptNew {
			return &Error{host: hostname, finger: ssh.FingerprintSHA256(key), file: h.file}
		}
		f, err := os.OpenFile(h.file, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("record host key in %s: %w", h.file, err)
		}
		defer f.Close()
		if _, err := fmt.Fprintln(f, knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)); err != nil {
			return fmt.Errorf("record host key in %s: %w", h.file, err)
		}
		return f.Sync()
	default:
		return err
	}
}
