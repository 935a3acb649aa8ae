package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/halite-fleet/halite/internal/clitest"
	"github.com/halite-fleet/halite/master/keys"
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
