package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// agentTarget is a small device the agent must build for: 32-bit ARMv7
// Linux, without cgo.
var agentTarget = []string{"GOOS=linux", "GOARCH=arm", "GOARM=7", "CGO_ENABLED=0"}

// forbidden are the packages the agent binary must not link, by import path
// prefix (a prefix matches the path itself and everything under it), and
// why.
var forbidden = map[string]string{
	"github.com/halite-fleet/halite/master":             "master code; the agent and the master never import each other",
	"go.etcd.io/bbolt":                                  "the master's embedded store",
	"github.com/spf13/cobra":                            "a CLI framework the agent does not need",
	"github.com/jackc/pgx":                              "PostgreSQL belongs to the master's returners and job cache",
	"github.com/redis":                                  "Redis belongs to the master's returners",
	"github.com/go-redis":                               "Redis belongs to the master's returners",
	"github.com/nikolalohinski/gonja":                   "reactor templates are rendered on the master",
	"net/http/pprof":                                    "a debug endpoint does not ship on devices",
	"net/http":                                          "with mime and the IDNA tables about 0.2 MiB; zap's only import of it is gone (third_party/zap)",
	"go.starlark.net":                                   "Starlark engines (about 0.6 MiB) are for agents built with -tags starlark",
	"github.com/halite-fleet/halite/engines/starlark":   "Starlark engines are for agents built with -tags starlark",
	"github.com/halite-fleet/halite/engines/httpengine": "the HTTP engines use net/http's client and server (about 1.3 MiB): -tags engines",
	"github.com/halite-fleet/halite/engines/forward":    "event_forward's NATS and MQTT clients belong to the master",
	"github.com/nats-io":                                "NATS belongs to the master's returners and engines",
	"github.com/eclipse/paho.mqtt.golang":               "MQTT belongs to the master's returners and engines",
	"github.com/prometheus":                             "the master's /metrics endpoint (client_golang, protobuf); the agent's metrics engine uses VictoriaMetrics' small client",
	"google.golang.org/protobuf":                        "brought by client_golang, the master's metrics",
	"github.com/halite-fleet/halite/relay":              "the relay (and its discovery) is for the amd64 and arm64 agents, or -tags relay",
	"github.com/google/gopacket":                        "the relay's ARP discovery (about 1.5 MiB with layers): not on the small devices",
	"encoding/xml":                                      "the relay's WS-Discovery: not on the small devices",
	"github.com/goreleaser/nfpm":                        "the package builder (with go-git and OpenPGP) is halite-flash's (firmware/pkg)",
	"github.com/halite-fleet/halite/firmware":           "the flasher and packager are operator-side",
}

func goCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	cmd := exec.Command(gobin, args...)
	cmd.Env = append(os.Environ(), agentTarget...)
	return cmd
}

// TestDeps keeps the agent binary's imports honest, as tailscale's
// cmd/tailscaled/deps_test.go does.
func TestDeps(t *testing.T) {
	out, err := goCmd(t, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderrOf(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages, want the agent's whole graph: %q", len(deps), out)
	}
	seenAgent, seenCaller := false, false
	for _, dep := range deps {
		switch dep {
		case "github.com/halite-fleet/halite/agent":
			seenAgent = true
		case "github.com/halite-fleet/halite/internal/callcmd":
			// The caller (with internal/output and internal/complete)
			// is part of the agent binary: halite-call is a name for it.
			seenCaller = true
		}
		for prefix, why := range forbidden {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				t.Errorf("halite-agent imports %s: %s", dep, why)
			}
		}
	}
	if !seenAgent {
		t.Errorf("go list -deps does not list the agent package; got %v", deps)
	}
	if !seenCaller {
		t.Errorf("go list -deps does not list internal/callcmd: the agent binary must carry the caller (halite-call is a symlink to it)")
	}
}

// TestNoCgo builds the agent for ARMv7 with cgo disabled: it must be one
// static binary.
func TestNoCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent for ARM")
	}
	f := armAgentELF(t)
	if f.Machine != elf.EM_ARM {
		t.Errorf("machine: got %v, want %v", f.Machine, elf.EM_ARM)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the agent binary asks for a dynamic loader (PT_INTERP); want a static binary")
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) != 0 {
		t.Errorf("imported libraries: got %v (%v), want none", libs, err)
	}
}

// armAgentELF builds the agent as goCmd does (ARMv7, cgo off) into a
// temporary directory and opens the binary, closed when the test ends.
func armAgentELF(t *testing.T) *elf.File {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "halite-agent")
	if out, err := goCmd(t, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 GOARCH=arm GOARM=7 go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("read the agent binary: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestTaggedBuilds: the agent built with -tags engines,starlark (the HTTP
// engines and Starlark user engines) still builds for ARMv7 without cgo and
// links what the tags promise.
func TestTaggedBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent for ARM")
	}
	out, err := goCmd(t, "list", "-tags", "engines,starlark", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -tags engines,starlark: %v\n%s", err, stderrOf(err))
	}
	for _, want := range []string{"go.starlark.net/starlark", "github.com/halite-fleet/halite/engines/httpengine", "github.com/halite-fleet/halite/engines/starlark"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("-tags engines,starlark does not link %s", want)
		}
	}
	bin := filepath.Join(t.TempDir(), "halite-agent")
	if out, err := goCmd(t, "build", "-tags", "engines,starlark", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags engines,starlark: %v\n%s", err, out)
	}
}
