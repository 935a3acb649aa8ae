package exec

import (
	"os"
	osexec "os/exec"
	"strings"
	"testing"
)

// agentTargets are the device platforms the agent is flashed on.
var agentTargets = []struct{ name, goarch, goarm, gomips string }{
	{"linux-mipsle-softfloat", "mipsle", "", "softfloat"},
	{"linux-armv7", "arm", "7", ""},
	{"linux-armv6", "arm", "6", ""},
	{"linux-arm64", "arm64", "", ""},
}

func goTool(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("cross-compiles; skipped with -short")
	}
	gobin, err := osexec.LookPath("go")
	if err != nil {
		t.Skip("no go command in PATH")
	}
	return gobin
}

// TestCrossCompile builds this package and grains, static, for every device
// platform: no cgo, nothing that only exists on amd64.
func TestCrossCompile(t *testing.T) {
	gobin := goTool(t)
	for _, tt := range agentTargets {
		for _, pkg := range []string{".", "../grains"} {
			t.Run(tt.name+"/"+pkg, func(t *testing.T) {
				cmd := osexec.Command(gobin, "build", "-o", os.DevNull, pkg)
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+tt.goarch,
					"GOARM="+tt.goarm, "GOMIPS="+tt.gomips)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("build %s for %s: %v\n%s", pkg, tt.name, err, out)
				}
			})
		}
	}
}

// TestDependencies keeps exec and grains to the standard library and zap,
// with no cgo, since they go into the agent's static binary.
func TestDependencies(t *testing.T) {
	gobin := goTool(t)
	out, err := osexec.Command(gobin, "list", "-deps",
		"-f", "{{if not .Standard}}{{.ImportPath}} {{len .CgoFiles}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	// yaml.v3 reads the grains file and internal/yamlemit writes it (the
	// agent links both anyway: its configuration, --out yaml).
	// internal/saltdata (Salt's nested keys) imports only the standard
	// library, internal/yamlemit only it and yaml.v3.
	allowed := []string{"go.uber.org/zap", "go.uber.org/multierr", "go.yaml.in/yaml/v3", "github.com/halite-fleet/halite/agent/exec",
		"github.com/halite-fleet/halite/agent/grains", "github.com/halite-fleet/halite/internal/saltdata",
		"github.com/halite-fleet/halite/internal/yamlemit"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, cgo, _ := strings.Cut(line, " ")
		ok := false
		for _, a := range allowed {
			if path == a || strings.HasPrefix(path, a+"/") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("dependency %s: want only the standard library and zap", path)
		}
		if cgo != "0" {
			t.Errorf("dependency %s has %s cgo files, want none", path, cgo)
		}
	}
}
