package main

import (
	"testing"

	"github.com/halite-fleet/halite/internal/clitest"
)

// TestMain lets the scripts run this command's real Main in-process, as
// "halite-flash".
func TestMain(m *testing.M) { clitest.Main(m, "halite-flash", Main) }

// TestScripts runs testdata/*.txtar, with a real master where a script
// starts one (clitest.Fixtures). Flashing real devices is tested in
// e2e/flash_test.go, against dropbear and OpenSSH.
func TestScripts(t *testing.T) { clitest.RunWith(t, clitest.Fixtures()) }
