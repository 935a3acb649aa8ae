package main

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/internal/gotrim"
)

// sizeBudget is what the armv7 agent, built as `make cross` builds it for
// 32-bit ARM (AGENT_GCFLAGS_SMALL, the gotrim overlay, AGENT_LDFLAGS_ARM,
// stripped), may weigh, with the caller inside (halite-call is a symlink
// to it): issue 17's 8.5 MiB. The agent with the caller, the OTA updater,
// the chunk fetcher, sealed pillar and cp.* is 8,802,466 bytes (go1.26.8):
// the trimmed standard library (third_party/gotrim), quic-go without debug
// logging and qlog on small devices (third_party/quic-go) and YAML written
// by internal/yamlemit, not go-yaml's encoder, took 512,000 off 9,314,466.
// docs/BENCHMARKS.md, "Agent size", records the figures and the levers.
const sizeBudget = 8.5 * 1024 * 1024

// agentGCFlagsSmall is the Makefile's AGENT_GCFLAGS_SMALL, one argument.
const agentGCFlagsSmall = "-gcflags=all=-l -d=maxshapelen=64,variablemakethreshold=0"

// TestAgentSize builds the armv7 agent as the Makefile does (with the
// trimmed standard library of third_party/gotrim) and holds it to
// sizeBudget.
func TestAgentSize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent for ARM")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "halite-agent")
	overlay := filepath.Join(dir, "gotrim-overlay.json")
	if err := gotrim.WriteForModule(context.Background(), "go", filepath.Join("..", ".."), nil, overlay); err != nil {
		t.Fatal(err)
	}
	// Keep in step with the Makefile's cross target for GOARCH=arm.
	args := []string{"build", "-trimpath", agentGCFlagsSmall, "-overlay=" + overlay, "-ldflags", "-s -w -R 0x1000", "-o", bin, "."}
	if out, err := goCmd(t, args...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("linux/arm v7 agent: %d bytes (%.2f MiB), budget %d", fi.Size(), float64(fi.Size())/(1<<20), int64(sizeBudget))
	if fi.Size() > sizeBudget {
		t.Errorf("linux/arm v7 agent: %d bytes, %d over the %d-byte budget (8.5 MiB, issue 17): "+
			"go tool nm -size -sort size on an unstripped build says where it went", fi.Size(), fi.Size()-sizeBudget, int64(sizeBudget))
	}
}

// TestSizeFlagsMatchMakefile: TestAgentSize builds with the Makefile's
// AGENT_GCFLAGS_SMALL and its trimmed standard library, so the size it
// checks is the size `make cross` ships.
func TestSizeFlagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"$(GO) run ./tools/gotrim -go $(GO) -o $(AGENT_OVERLAY)",
		`case $$goarch in arm|mips*) gcf=("$(AGENT_GCFLAGS_SMALL)" -overlay=$(AGENT_OVERLAY));; esac;`,
	} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("the Makefile's cross target does not say %q: TestAgentSize builds the 32-bit ARM and MIPS agent with the gotrim overlay", want)
		}
	}
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "AGENT_GCFLAGS_SMALL := "); ok {
			if v != agentGCFlagsSmall {
				t.Fatalf("Makefile AGENT_GCFLAGS_SMALL is %q, TestAgentSize builds with %q", v, agentGCFlagsSmall)
			}
			return
		}
	}
	t.Fatal("Makefile has no AGENT_GCFLAGS_SMALL")
}

// costly are functions of other modules that the agent's own packages must
// not call, by import path and name, and why: each one alone adds more to
// the armv7 agent than its use is worth (docs/BENCHMARKS.md, "agent size").
var costly = map[string]map[string]string{
	"go.uber.org/zap": {
		"Any": "zap.Any instantiates its field constructor for every type it knows (about 0.1 MiB on armv7): " +
			"use zap.Reflect for data, zap.String(k, fmt.Sprint(v)) for a panic value",
	},
	"go.yaml.in/yaml/v3": {
		"Marshal":    yamlEncoderCost,
		"NewEncoder": yamlEncoderCost,
	},
}

const yamlEncoderCost = "go-yaml's encoder (its libyaml emitter) costs the armv7 agent 94 KB: " +
	"write YAML with internal/yamlemit, which gives go-yaml's bytes (go-yaml is for reading)"

// TestNoYAMLEncoder: the armv7 agent links no go-yaml emitter. Besides the
// calls TestNoCostlyCalls looks for, (*yaml.Node).Encode would bring it,
// and so would any interface call of a method Encode(interface{}) error
// on a reachable path (the linker then keeps that method of every
// reachable type, *yaml.Node's among them): zap's ReflectedEncoder was
// one (third_party/zap, tools/zapfork.patch).
func TestNoYAMLEncoder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent for ARM")
	}
	syms, err := armAgentELF(t).Symbols()
	if err != nil {
		t.Fatalf("symbols of the agent binary: %v", err)
	}
	decoder := false
	var encoder []string
	for _, s := range syms {
		switch {
		case strings.HasPrefix(s.Name, "go.yaml.in/yaml/v3.yaml_emitter_") && !strings.Contains(s.Name, ".arginfo"),
			s.Name == "go.yaml.in/yaml/v3.(*Node).Encode",
			s.Name == "go.yaml.in/yaml/v3.Marshal":
			encoder = append(encoder, s.Name)
		case s.Name == "go.yaml.in/yaml/v3.yaml_parser_parse":
			decoder = true
		}
	}
	if len(encoder) > 0 {
		t.Errorf("the agent links %d functions of go-yaml's encoder (%s): %s; "+
			"go build -ldflags=-dumpdep says what keeps them", len(encoder), strings.Join(encoder[:min(3, len(encoder))], ", "), yamlEncoderCost)
	}
	if !decoder {
		t.Errorf("no go.yaml.in/yaml/v3.yaml_parser_parse in the agent's %d symbols: does the check still look at the right names?", len(syms))
	}
}

// TestNoCostlyCalls: no package of this module that the armv7 agent links
// calls a function of costly.
func TestNoCostlyCalls(t *testing.T) {
	out, err := goCmd(t, "list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}}|{{.Dir}}|{{join .GoFiles ","}}{{end}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderrOf(err))
	}
	const module = "github.com/halite-fleet/halite"
	fset := token.NewFileSet()
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 || (parts[0] != module && !strings.HasPrefix(parts[0], module+"/")) {
			continue
		}
		for _, name := range strings.Split(parts[2], ",") {
			if name == "" {
				continue
			}
			path := filepath.Join(parts[1], name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			checked++
			// local name -> import path, for the imports costly names.
			local := map[string]string{}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if costly[p] == nil {
					continue
				}
				n := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					n = imp.Name.Name
				}
				local[n] = p
			}
			if len(local) == 0 {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok || local[x.Name] == "" {
					return true
				}
				if why, bad := costly[local[x.Name]][sel.Sel.Name]; bad {
					t.Errorf("%s: %s.%s: %s", fset.Position(sel.Pos()), x.Name, sel.Sel.Name, why)
				}
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of the agent's own packages, want them all: %q", checked, out)
	}
}
