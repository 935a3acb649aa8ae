package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps keeps the master binary's imports honest: it links no device
// agent code. What the master and the agent share (Salt's data rules, the
// wire, targets, engines) lives outside agent/; see docs/ARCHITECTURE.md.
func TestDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	deps := strings.Fields(string(out))
	seenMaster := false
	for _, dep := range deps {
		if dep == "github.com/halite-fleet/halite/master" {
			seenMaster = true
		}
		if dep == "github.com/halite-fleet/halite/agent" || strings.HasPrefix(dep, "github.com/halite-fleet/halite/agent/") {
			t.Errorf("halite-master imports %s: the master links no agent code", dep)
		}
	}
	if !seenMaster {
		t.Errorf("go list -deps does not list the master package; got %v", deps)
	}
}
