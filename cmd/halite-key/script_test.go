package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/clitest"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/master"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-key".
func TestMain(m *testing.M) { clitest.Main(m, "halite-key", Main) }

// TestScripts runs testdata/*.txtar (see package clitest) with its
// Fixtures and one more command:
//
//	keys CONFIG_DIR ID[=RELAY] ...  agents knock: their keys are left pending,
//	                                through RELAY when given (before master)
func TestScripts(t *testing.T) {
	cmds := clitest.Fixtures()
	cmds["keys"] = scriptKeys
	clitest.RunWith(t, cmds)
}

func scriptKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: keys CONFIG_DIR ID[=RELAY] ...")
	}
	s, err := keys.Open(clitest.LoadMaster(ts, args[0]).PkiDir, keys.Options{})
	if err != nil {
		ts.Fatalf("open key store: %v", err)
	}
	for _, a := range args[1:] {
		id, via, _ := strings.Cut(a, "=")
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			ts.Fatalf("%v", err)
		}
		if _, err := s.Check(id, pub, via); err != nil {
			ts.Fatalf("check %s: %v", id, err)
		}
	}
}

// knock says Hello to the master at addr as id with a new key, over QUIC,
// and waits for its key status.
func knock(t *testing.T, addr, id string) {
	t.Helper()
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		t.Fatalf("dial master: %v", err)
	}
	defer conn.CloseWithError(0, "")
	stream, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := protocol.NewFramer(stream, protocol.DefaultMaxFrame)
	if err := f.Write(&protocol.Hello{ID: id, Version: "test", Caps: protocol.CapabilityVersion}); err != nil {
		t.Fatal(err)
	}
	if msg, err := f.Read(); err != nil {
		t.Fatalf("hello %s: %v", id, err)
	} else if ks, ok := msg.(*protocol.KeyStatus); !ok || ks.Status != protocol.KeyPending {
		t.Fatalf("hello %s: got %#v, want pending", id, msg)
	}
}

// answerAfter is standard input whose first read runs before, then gives
// the answer.
type answerAfter struct {
	before func()
	r      io.Reader
}

func (a *answerAfter) Read(p []byte) (int, error) {
	if a.before != nil {
		a.before()
		a.before = nil
	}
	return a.r.Read(p)
}

// TestActsOnKeysShown: halite-key acts on exactly the keys it showed before
// asking, as salt-key does (Salt 3006 salt/key.py KeyCLI.run: "accept/
// reject/delete the same keys we're printed to the user", by match_dict): a
// key that arrives while the operator reads the question is left pending
// though it matches the glob. Key files under ids now invalid are listed.
func TestActsOnKeysShown(t *testing.T) {
	dir := t.TempDir()
	conf := "root_dir: " + dir + "\ninterface: 127.0.0.1\nlog_file: ''\nsock_dir: " + testwait.ShortDir(t) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "master"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadMaster(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.PkiDir, keys.DirPending), 0o700); err != nil {
		t.Fatal(err)
	}
	id, _ := protocol.GenerateIdentity()
	if err := os.WriteFile(filepath.Join(cfg.PkiDir, keys.DirPending, "cam9,evil"), protocol.EncodePublicKey(id.Pub), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Port = 0
	m, err := master.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("master Run: %v", err)
		}
	})
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("master stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("master not ready after 20s")
	}
	addr := m.Addr().String()
	knock(t, addr, "cam1")

	var out, errOut strings.Builder
	stdin := &answerAfter{before: func() { knock(t, addr, "cam2") }, r: strings.NewReader("y\n")}
	if err := run(ctx, options{configDir: dir, action: "accept", match: "cam*"}, stdin, &out, &errOut); err != nil {
		t.Fatalf("halite-key -a 'cam*': %v (%s)", err, errOut.String())
	}
	want := "The following keys are going to be accepted:\nUnaccepted Keys:\ncam1\nProceed? [n/Y] Key for minion cam1 accepted.\n"
	if got := out.String(); got != want {
		t.Errorf("halite-key -a 'cam*':\ngot  %q\nwant %q", got, want)
	}

	out.Reset()
	if err := run(ctx, options{configDir: dir, action: "list", match: "all"}, nil, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	want = "Accepted Keys:\ncam1\nDenied Keys:\nUnaccepted Keys:\ncam2\nRejected Keys:\n" +
		"Invalid Keys (refused; remove these files under pki_dir by hand):\n\"minions_pre/cam9,evil\"\n"
	if got := out.String(); got != want {
		t.Errorf("halite-key -L:\ngot  %q\nwant %q", got, want)
	}
}
