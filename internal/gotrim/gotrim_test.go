package gotrim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTrims makes a GOROOT with one original and a trim root for version
// with a MANIFEST replacing it and deleting a second file.
func fakeTrims(t *testing.T, version string) (trimRoot string, tc Toolchain) {
	t.Helper()
	root := t.TempDir()
	goroot := filepath.Join(root, "goroot")
	trimRoot = filepath.Join(root, "trims")
	orig := []byte("package tls\n")
	gone := []byte("package tls // gone\n")
	for path, b := range map[string][]byte{
		filepath.Join(goroot, "src/crypto/tls/a.go"):            orig,
		filepath.Join(goroot, "src/crypto/tls/gone.go"):         gone,
		filepath.Join(trimRoot, version, "src/crypto/tls/a.go"): []byte("package tls // trimmed\n"),
	} {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	manifest := "# test\nreplace " + sum(orig) + " src/crypto/tls/a.go\ndelete " + sum(gone) + " src/crypto/tls/gone.go\n"
	if err := os.WriteFile(filepath.Join(trimRoot, version, "MANIFEST"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return trimRoot, Toolchain{Version: version, Root: goroot}
}

func TestOverlay(t *testing.T) {
	trimRoot, tc := fakeTrims(t, "go1.26.8")
	got, err := Overlay(trimRoot, tc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		filepath.Join(tc.Root, "src/crypto/tls/a.go"):    filepath.Join(trimRoot, "go1.26.8", "src/crypto/tls/a.go"),
		filepath.Join(tc.Root, "src/crypto/tls/gone.go"): "",
	}
	if len(got) != len(want) {
		t.Fatalf("overlay %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("overlay[%s] = %q, want %q", k, got[k], v)
		}
	}
}

// TestOverlayRefuses: another Go version, a changed or missing original,
// a bad MANIFEST or a missing replacement are refused with an error that
// says what to do.
func TestOverlayRefuses(t *testing.T) {
	for _, tt := range []struct {
		name   string
		break_ func(trimRoot string, tc *Toolchain)
		want   string
	}{
		{"other version", func(_ string, tc *Toolchain) { tc.Version = "go1.26.9" }, "are for go1.26.8, not go1.26.9"},
		{"changed original", func(_ string, tc *Toolchain) {
			os.WriteFile(filepath.Join(tc.Root, "src/crypto/tls/a.go"), []byte("package tls // patched\n"), 0o644)
		}, "src/crypto/tls/a.go has SHA-256"},
		{"changed deleted original", func(_ string, tc *Toolchain) {
			os.WriteFile(filepath.Join(tc.Root, "src/crypto/tls/gone.go"), []byte("package tls\n"), 0o644)
		}, "src/crypto/tls/gone.go has SHA-256"},
		{"missing original", func(_ string, tc *Toolchain) {
			os.Remove(filepath.Join(tc.Root, "src/crypto/tls/gone.go"))
		}, "which this Go"},
		{"missing replacement", func(trimRoot string, _ *Toolchain) {
			os.Remove(filepath.Join(trimRoot, "go1.26.8", "src/crypto/tls/a.go"))
		}, "MANIFEST replaces src/crypto/tls/a.go"},
		{"bad manifest", func(trimRoot string, _ *Toolchain) {
			os.WriteFile(filepath.Join(trimRoot, "go1.26.8", "MANIFEST"), []byte("replace abc /etc/passwd\n"), 0o644)
		}, "MANIFEST:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			trimRoot, tc := fakeTrims(t, "go1.26.8")
			tt.break_(trimRoot, &tc)
			out := filepath.Join(t.TempDir(), "overlay.json")
			err := Write(trimRoot, tc, out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write: %v, want an error saying %q", err, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("Write refused but wrote %s", out)
			}
		})
	}
}

// TestToolRefuses: tools/gotrim, which the Makefile runs, exits non-zero
// and says REFUSED for a Go the trims were not made for.
func TestToolRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tools/gotrim")
	}
	mod := filepath.Join("..", "..")
	tool := filepath.Join(t.TempDir(), "gotrim")
	if out, err := exec.Command("go", "build", "-o", tool, "../../tools/gotrim").CombinedOutput(); err != nil {
		t.Fatalf("go build tools/gotrim: %v\n%s", err, out)
	}
	// A module copy whose trims are for another version: the tool must
	// refuse the Go that runs this test.
	fake := t.TempDir()
	os.WriteFile(filepath.Join(fake, "go.mod"), []byte("module example.com/x\n\ngo 1.26\n"), 0o644)
	os.MkdirAll(filepath.Join(fake, Dir, "go1.0.1"), 0o755)
	os.WriteFile(filepath.Join(fake, Dir, "go1.0.1", "MANIFEST"), []byte("delete "+strings.Repeat("0", 64)+" src/x.go\n"), 0o644)
	out := filepath.Join(t.TempDir(), "o.json")
	cmd := exec.Command(tool, "-C", fake, "-o", out)
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "REFUSED") || !strings.Contains(string(b), "are for go1.0.1, not go") {
		t.Fatalf("gotrim for trims of go1.0.1: %v, %s; want a non-zero exit saying REFUSED ... are for go1.0.1", err, b)
	}
	// This module's own trims are for the Go that builds it.
	cmd = exec.Command(tool, "-C", mod, "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gotrim on this module: %v\n%s (go.mod's Go and third_party/gotrim out of step?)", err, b)
	}
	var ov struct{ Replace map[string]string }
	b, _ = os.ReadFile(out)
	if err := json.Unmarshal(b, &ov); err != nil || len(ov.Replace) < 20 {
		t.Fatalf("overlay %s: %v, %d files", b, err, len(ov.Replace))
	}
}

// trimcheck builds testdata/trimcheck with this module's overlay for
// goarch (GOOS=linux) and returns the binary.
func trimcheck(t *testing.T, goarch string) string {
	t.Helper()
	ov := filepath.Join(t.TempDir(), "overlay.json")
	if err := WriteForModule(context.Background(), "go", filepath.Join("..", ".."), nil, ov); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "trimcheck-"+goarch)
	cmd := exec.Command("go", "build", "-overlay", ov, "-o", bin, "./testdata/trimcheck")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM=7")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -overlay ./testdata/trimcheck for %s: %v\n%s", goarch, err, out)
	}
	return bin
}
