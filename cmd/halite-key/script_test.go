package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/clitest"
	"github.com/halite-fleet/halite/master"
	"github.com/halite-fleet/halite/master/keys"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-key".
func TestMain(m *testing.M) { clitest.Main(m, "halite-key", Main) }

// TestScripts runs testdata/*.txtar (see package clitest), with three more
// commands:
//
//	conf CONFIG_DIR                 writes CONFIG_DIR/master, with root_dir
//	                                CONFIG_DIR as an absolute path (the master
//	                                runs in the test's process, elsewhere)
//	keys CONFIG_DIR ID[=RELAY] ...  agents knock: their keys are left pending,
//	                                through RELAY when given (before master)
//	master CONFIG_DIR               runs the real master in-process until the
//	                                script ends (on a free port)
func TestScripts(t *testing.T) {
	clitest.RunWith(t, map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"conf":   scriptConf,
		"keys":   scriptKeys,
		"master": scriptMaster,
	})
}

func scriptConf(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: conf CONFIG_DIR")
	}
	dir := ts.MkAbs(args[0])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		ts.Fatalf("%v", err)
	}
	conf := "root_dir: " + dir + "\ninterface: 127.0.0.1\nlog_file: ''\n"
	if err := os.WriteFile(filepath.Join(dir, "master"), []byte(conf), 0o644); err != nil {
		ts.Fatalf("%v", err)
	}
}

func loadMaster(ts *testscript.TestScript, dir string) *config.Master {
	cfg, err := config.LoadMaster(ts.MkAbs(dir), func(config.Warning) {})
	if err != nil {
		ts.Fatalf("load master config: %v", err)
	}
	return cfg
}

func scriptKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: keys CONFIG_DIR ID[=RELAY] ...")
	}
	s, err := keys.Open(loadMaster(ts, args[0]).PkiDir, keys.Options{})
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

func scriptMaster(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: master CONFIG_DIR")
	}
	cfg := loadMaster(ts, args[0])
	cfg.Interface, cfg.Port = "127.0.0.1", 0
	m, err := master.New(cfg, zap.NewNop())
	if err != nil {
		ts.Fatalf("master: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	ts.Defer(func() {
		cancel()
		if err := <-done; err != nil {
			ts.Logf("master Run: %v", err)
		}
	})
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err
		ts.Fatalf("master stopped before it was ready: %v", err)
	case <-time.After(20 * time.Second):
		ts.Fatalf("master not ready after 20s")
	}
}
