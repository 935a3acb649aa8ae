package sshtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Server is a running test SSH server.
type Server struct {
	Addr    string
	HostKey ssh.PublicKey

	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn map[net.Conn]bool
	Runs int // exec requests served (under mu)
}

// Start listens on addr (127.0.0.1:0) and serves user with password.
func Start(addr, user, password string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s, err := Serve(ln, user, password)
	if err != nil {
		ln.Close()
	}
	return s, err
}

// Serve serves user with password on ln (one made elsewhere: in another
// network namespace, say); Close closes it.
func Serve(ln net.Listener, user, password string) (*Server, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{PasswordCallback: func(c ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
		if c.User() == user && string(pw) == password {
			return nil, nil
		}
		return nil, errors.New("wrong user or password")
	}}
	cfg.AddHostKey(signer)
	s := &Server{Addr: ln.Addr().String(), HostKey: signer.PublicKey(), ln: ln, conn: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conn[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c, cfg)
				s.mu.Lock()
				delete(s.conn, c)
				s.mu.Unlock()
			}()
		}
	}()
	return s, nil
}

// Count returns how many commands the server ran.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Runs
}

// Close stops the server and waits for its connections.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.session(ch, creqs)
	}
}

func (s *Server) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for r := range reqs {
		if r.Type != "exec" {
			r.Reply(false, nil)
			continue
		}
		var p struct{ Cmd string }
		if err := ssh.Unmarshal(r.Payload, &p); err != nil {
			r.Reply(false, nil)
			continue
		}
		r.Reply(true, nil)
		s.mu.Lock()
		s.Runs++
		s.mu.Unlock()
		cmd := exec.Command("sh", "-c", p.Cmd)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		code := 0
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else {
				code = 127
			}
		}
		var st [4]byte
		binary.BigEndian.PutUint32(st[:], uint32(code))
		ch.SendRequest("exit-status", false, st[:])
		return
	}
}
