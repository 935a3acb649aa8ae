package main

import (
	"go/build/constraint"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// allTags are the agent's own build tags, all at once.
const allTags = "relay,engines,starlark,reactor,webhook,halite_tamper,halite_unreachable"

// tagBuilds is every build-tag combination of the agent that is supported,
// and what each must link. Each tag alone and all together are type-checked
// with go vet (which compiles the whole graph, without linking); armv7 with
// -tags relay, the client-site relay on a 32-bit device, is built for real.
// TestNoCgo and TestTaggedBuilds build armv7 plain and with
// engines,starlark; e2e builds the host agent and -tags halite_tamper.
var tagBuilds = []struct {
	name  string
	arm   bool   // armv7 (agentTarget), else the host
	tags  string // -tags
	build bool   // go build, else go vet
	links string // a package the combination must link ("" none to check)
}{
	{name: "host/relay", tags: "relay", links: "github.com/halite-fleet/halite/relay"},
	{name: "host/engines", tags: "engines", links: "github.com/halite-fleet/halite/engines/httpengine"},
	{name: "host/starlark", tags: "starlark", links: "github.com/halite-fleet/halite/engines/starlark"},
	{name: "host/reactor", tags: "reactor", links: "github.com/halite-fleet/halite/render"}, // Jinja (gonja)
	{name: "host/webhook", tags: "webhook", links: "github.com/halite-fleet/halite/returners/webhook"},
	{name: "host/halite_tamper", tags: "halite_tamper", links: "github.com/halite-fleet/halite/relay"},
	{name: "host/halite_unreachable", tags: "halite_unreachable"}, // the OTA tests' build that never reaches a master
	{name: "host/all", tags: allTags},
	{name: "armv7/relay", arm: true, tags: "relay", build: true, links: "github.com/halite-fleet/halite/relay"},
	{name: "armv7/all", arm: true, tags: allTags, links: "github.com/halite-fleet/halite/relay"},
}

// TestBuildTags builds the agent with every supported combination of its
// build tags (tagBuilds), so that code behind a tag no other build selects
// cannot rot unseen.
func TestBuildTags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent once per build-tag combination")
	}
	for _, tc := range tagBuilds {
		t.Run(tc.name, func(t *testing.T) {
			cmd := func(args ...string) *exec.Cmd {
				c := goCmd(t, args...)
				if !tc.arm {
					c.Env = os.Environ()
				}
				return c
			}
			if tc.links != "" {
				out, err := cmd("list", "-tags", tc.tags, "-deps", "-f", "{{.ImportPath}}", ".").Output()
				if err != nil {
					t.Fatalf("go list -tags %s: %v\n%s", tc.tags, err, stderrOf(err))
				}
				if !slices.Contains(strings.Fields(string(out)), tc.links) {
					t.Errorf("-tags %s does not link %s", tc.tags, tc.links)
				}
			}
			args := []string{"vet", "-tags", tc.tags, "."}
			if tc.build {
				args = []string{"build", "-tags", tc.tags, "-o", filepath.Join(t.TempDir(), "halite-agent"), "."}
			}
			if out, err := cmd(args...).CombinedOutput(); err != nil {
				t.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// TestBuildTagsCovered: every build tag a //go:build line of the module
// names (not of the modules under third_party), other than an OS, an
// architecture or race, is in allTags, so a new tag comes with its build in
// tagBuilds.
func TestBuildTagsCovered(t *testing.T) {
	known := map[string]bool{"race": true, "unix": true}
	for _, s := range []string{"linux", "darwin", "windows", "freebsd", "netbsd", "openbsd", "android", "ios",
		"arm", "arm64", "amd64", "386", "mips", "mipsle", "mips64", "mips64le", "riscv64", "ppc64le", "s390x"} {
		known[s] = true
	}
	tags := strings.Split(allTags, ",")
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		// Another module (third_party's forks): its tags are its own
		// (quic-go's quicdebug; tools/quicfork.sh builds the copy with it).
		if d.IsDir() && path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !constraint.IsGoBuild(line) {
				continue
			}
			expr, err := constraint.Parse(line)
			if err != nil {
				t.Errorf("%s: %q: %v", path, line, err)
				continue
			}
			for _, tag := range tagsOf(expr) {
				if !known[tag] && !slices.Contains(tags, tag) {
					t.Errorf("%s: build tag %q is in no combination of tagBuilds", path, tag)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the module: %v", err)
	}
}

// tagsOf returns every tag expr names.
func tagsOf(expr constraint.Expr) []string {
	switch x := expr.(type) {
	case *constraint.TagExpr:
		return []string{x.Tag}
	case *constraint.NotExpr:
		return tagsOf(x.X)
	case *constraint.AndExpr:
		return append(tagsOf(x.X), tagsOf(x.Y)...)
	case *constraint.OrExpr:
		return append(tagsOf(x.X), tagsOf(x.Y)...)
	}
	return nil
}
