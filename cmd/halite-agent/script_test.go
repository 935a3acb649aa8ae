package main

import (
	"testing"

	"github.com/halite-fleet/halite/internal/clitest"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-agent" and, as the symlink on a device, "halite-call": the same
// Main, which picks the caller by argv[0].
func TestMain(m *testing.M) {
	clitest.Mains(m, map[string]func() int{"halite-agent": Main, "halite-call": Main})
}

// TestScripts runs testdata/*.txtar (see package clitest) with the
// Daemons commands.
func TestScripts(t *testing.T) { clitest.RunWith(t, clitest.Daemons()) }
