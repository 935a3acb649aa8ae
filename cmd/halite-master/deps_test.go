package main

import (
	"os/exec"
	"strings"
	"testing"
)

// saltCmdDeps are the agent packages the master binary links, and only
// because main gives salt.cmd the agent's execution modules (Salt runs the
// minion's modules on the master for salt.cmd): agent/exec and the grains
// it reads. The master package itself links none (TestMasterPackageDeps).
var saltCmdDeps = map[string]bool{
	"github.com/halite-fleet/halite/agent/exec":   true,
	"github.com/halite-fleet/halite/agent/grains": true,
}

// TestDeps keeps the master binary's imports honest: it links no device
// agent code but the execution modules salt.cmd runs. What the master and
// the agent share (Salt's data rules, the wire, targets, engines) lives
// outside agent/; see docs/ARCHITECTURE.md.
func TestDeps(t *testing.T) {
	deps := goDeps(t, ".")
	seenMaster := false
	for _, dep := range deps {
		if dep == "github.com/halite-fleet/halite/master" {
			seenMaster = true
		}
		if isAgent(dep) && !saltCmdDeps[dep] {
			t.Errorf("halite-master imports %s: the master links no agent code but salt.cmd's modules", dep)
		}
	}
	if !seenMaster {
		t.Errorf("go list -deps does not list the master package; got %v", deps)
	}
}

// TestMasterPackageDeps: the master package and everything under it
// import nothing under agent/ (they get salt.cmd's modules through
// master.SetLocalCall).
func TestMasterPackageDeps(t *testing.T) {
	for _, dep := range goDeps(t, "github.com/halite-fleet/halite/master/...") {
		if isAgent(dep) {
			t.Errorf("package master imports %s: the master imports nothing under agent/", dep)
		}
	}
}

func isAgent(dep string) bool {
	return dep == "github.com/halite-fleet/halite/agent" || strings.HasPrefix(dep, "github.com/halite-fleet/halite/agent/")
}

// goDeps is go list -deps of pattern.
func goDeps(t *testing.T, pattern string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", pattern).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, stderr)
	}
	return strings.Fields(string(out))
}
