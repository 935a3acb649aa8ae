package firmware

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSmallBuildRefusesOtherGo: building a 32-bit ARM or MIPS agent from
// source takes the gotrim overlay, and a module whose trims were made for
// another Go fails the build with gotrim's reason instead of building an
// agent without them.
func TestSmallBuildRefusesOtherGo(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26\n"), 0o644)
	trims := filepath.Join(src, "third_party", "gotrim", "go1.0.1")
	os.MkdirAll(trims, 0o755)
	os.WriteFile(filepath.Join(trims, "MANIFEST"), []byte("delete "+strings.Repeat("0", 64)+" src/x.go\n"), 0o644)
	_, err := Source{SrcDir: src, CacheDir: t.TempDir()}.AgentBinary(context.Background(), mustArch(t, "armv7"))
	if err == nil || !strings.Contains(err.Error(), "trims") || !strings.Contains(err.Error(), "are for go1.0.1") {
		t.Fatalf("build armv7 with trims for go1.0.1: %v, want gotrim's refusal", err)
	}
}

// TestAgentLDFlagsMatchMakefile: halite-flash's source build links the
// 32-bit ARM agent with the Makefile's AGENT_LDFLAGS_ARM (4 KiB segment
// alignment), so the agent it ships is the size `make cross` measures and
// cmd/halite-agent's TestAgentSize holds to 8.5 MiB; other arches do not
// take it (MIPS kernels with 16 and 64 KiB pages exist).
func TestAgentLDFlagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "AGENT_LDFLAGS_ARM := "); ok {
			want = v
		}
	}
	if want == "" || want != agentLDFlagsARM {
		t.Fatalf("Makefile AGENT_LDFLAGS_ARM is %q, firmware builds with %q", want, agentLDFlagsARM)
	}
	for _, name := range []string{"armv6", "armv7", "mipsle", "arm64", "amd64"} {
		ld := agentLDFlags(mustArch(t, name), "1.2.3")
		if has := strings.Contains(ld, want); has != strings.HasPrefix(name, "armv") {
			t.Errorf("%s: ldflags %q (AGENT_LDFLAGS_ARM %q only on 32-bit ARM)", name, ld, want)
		}
		if !strings.HasPrefix(ld, "-s -w") || !strings.Contains(ld, "internal/version.Version=1.2.3") {
			t.Errorf("%s: ldflags %q, want stripped with the version stamped", name, ld)
		}
	}
}
