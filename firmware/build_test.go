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
