package main

import (
	"testing"

	"github.com/halite-fleet/halite/internal/clitest"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite".
func TestMain(m *testing.M) { clitest.Main(m, "halite", Main) }

// TestScripts runs testdata/*.txtar (see package clitest) with its
// Fixtures: a real master and agents in the test's process.
func TestScripts(t *testing.T) { clitest.RunWith(t, clitest.Fixtures()) }

func init() { clitest.RegisterFakeStateRun() }
