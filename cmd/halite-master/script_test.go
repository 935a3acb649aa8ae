package main

import (
	"testing"

	"github.com/halite-fleet/halite/internal/clitest"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-master".
func TestMain(m *testing.M) { clitest.Main(m, "halite-master", Main) }

// TestScripts runs testdata/*.txtar (see package clitest) with the
// Daemons commands.
func TestScripts(t *testing.T) {
	clitest.RunWith(t, clitest.Daemons())
}
