package gotrim

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dir is where the trims live, relative to the module root: one folder
// per Go version, each with a MANIFEST and its replacement files under
// their GOROOT-relative paths.
const Dir = "third_party/gotrim"

// Toolchain is the Go toolchain an overlay is made for.
type Toolchain struct {
	Version string // go env GOVERSION, e.g. "go1.26.8"
	Root    string // go env GOROOT
}

// CurrentToolchain asks goCmd ("go" if empty), run in moduleDir with env
// (nil: the process's) as a build there runs it (go.mod's toolchain line
// and GOTOOLCHAIN apply), for its version and root.
func CurrentToolchain(ctx context.Context, goCmd, moduleDir string, env []string) (Toolchain, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "env", "GOVERSION", "GOROOT")
	cmd.Dir = moduleDir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Toolchain{}, fmt.Errorf("go env GOVERSION GOROOT: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || lines[0] == "" || lines[1] == "" {
		return Toolchain{}, fmt.Errorf("go env GOVERSION GOROOT: unexpected output %q", out)
	}
	return Toolchain{Version: strings.TrimSpace(lines[0]), Root: strings.TrimSpace(lines[1])}, nil
}

// An entry is one MANIFEST line: "replace|delete SHA256 PATH", PATH
// relative to GOROOT with slashes, SHA256 that of the original file the
// trim was made from. replace takes the file of the same PATH under the
// version's folder; delete leaves the original out of the build.
type entry struct {
	action string
	sum    string
	path   string
}

// readManifest reads dir/MANIFEST.
func readManifest(dir string) ([]entry, error) {
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	var entries []entry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || (f[0] != "replace" && f[0] != "delete") || len(f[1]) != 64 ||
			strings.HasPrefix(f[2], "/") || strings.Contains(f[2], "..") {
			return nil, fmt.Errorf("%s/MANIFEST:%d: want \"replace|delete SHA256 GOROOT-RELATIVE-PATH\", got %q", dir, n, line)
		}
		entries = append(entries, entry{f[0], f[1], f[2]})
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s/MANIFEST lists no file", dir)
	}
	return entries, nil
}

// Overlay returns the overlay (GOROOT file -> replacement, "" to leave the
// file out) for tc from the trims under trimRoot (a module's Dir). It
// refuses when trimRoot has no trims for tc.Version, or when an original
// in tc.Root is missing or differs from the one the trims were made from:
// building the device agent with them then would mix two versions of a
// package.
func Overlay(trimRoot string, tc Toolchain) (map[string]string, error) {
	dir := filepath.Join(trimRoot, tc.Version)
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		have, _ := filepath.Glob(filepath.Join(trimRoot, "go*", "MANIFEST"))
		var versions []string
		for _, h := range have {
			versions = append(versions, filepath.Base(filepath.Dir(h)))
		}
		return nil, fmt.Errorf("the device agent's standard-library trims (%s) are for %s, not %s: "+
			"port them to %s (%s/HALITE.md says how) or build with the Go they were made for",
			trimRoot, strings.Join(versions, ", "), tc.Version, tc.Version, trimRoot)
	}
	entries, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	replace := make(map[string]string, len(entries))
	for _, e := range entries {
		orig := filepath.Join(tc.Root, filepath.FromSlash(e.path))
		b, err := os.ReadFile(orig)
		if err != nil {
			return nil, fmt.Errorf("%s trims %s, which this Go (%s) lacks: %w", dir, e.path, tc.Root, err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != e.sum {
			return nil, fmt.Errorf("%s: %s has SHA-256 %x, the trims were made from %s: "+
				"this GOROOT (%s) is not the %s they were made for; port them (%s/HALITE.md)",
				dir, e.path, sum, e.sum, tc.Root, tc.Version, trimRoot)
		}
		switch e.action {
		case "delete":
			replace[orig] = ""
		case "replace":
			repl, err := filepath.Abs(filepath.Join(dir, filepath.FromSlash(e.path)))
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(repl); err != nil {
				return nil, fmt.Errorf("%s/MANIFEST replaces %s: %w", dir, e.path, err)
			}
			replace[orig] = repl
		}
	}
	return replace, nil
}

// Write writes the overlay file for tc and the trims under trimRoot to out,
// in the form `go build -overlay` reads.
func Write(trimRoot string, tc Toolchain, out string) error {
	replace, err := Overlay(trimRoot, tc)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(struct{ Replace map[string]string }{replace}, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("write overlay: %w", err)
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write overlay: %w", err)
	}
	return nil
}

// WriteForModule writes to out the overlay for the toolchain goCmd runs in
// moduleDir with env (see CurrentToolchain) and the trims of that module.
func WriteForModule(ctx context.Context, goCmd, moduleDir string, env []string, out string) error {
	tc, err := CurrentToolchain(ctx, goCmd, moduleDir, env)
	if err != nil {
		return err
	}
	return Write(filepath.Join(moduleDir, filepath.FromSlash(Dir)), tc, out)
}
