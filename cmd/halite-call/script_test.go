package main

import (
	"testing"

	"github.com/halite-fleet/halite/internal/clitest"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-call".
func TestMain(m *testing.M) { clitest.Main(m, "halite-call", Main) }

// TestScripts runs testdata/*.txtar (see package clitest).
func TestScripts(t *testing.T) { clitest.Run(t) }

func init() { clitest.RegisterFakeStateRun() }
