package firmware

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/halite-fleet/halite/internal/gotrim"
)

// modulePath is the module the agent is built from.
const modulePath = "github.com/halite-fleet/halite"

// agentGCFlags are the Makefile's AGENT_GCFLAGS (amd64, arm64: inlining
// kept in the hot packages) and agentGCFlagsSmall its AGENT_GCFLAGS_SMALL
// (32-bit ARM and MIPS: inlining off everywhere and two size-only compiler
// settings, see the Makefile; those builds also take the gotrim overlay,
// the Makefile's AGENT_OVERLAY). Keep them in step with the Makefile.
var (
	agentGCFlags = []string{"-gcflags=all=-l", "-gcflags=runtime/...=", "-gcflags=internal/runtime/...=",
		"-gcflags=crypto/...=", "-gcflags=sync/...=", "-gcflags=github.com/quic-go/...=", "-gcflags=github.com/fxamacker/...="}
	agentGCFlagsSmall = []string{"-gcflags=all=-l -d=maxshapelen=64,variablemakethreshold=0"}
)

// Source says where the agent binary for an architecture comes from, in
// this order: Binary (one file, for one arch), Dist (a `make cross` output
// directory: Dist/linux-<arch>/halite-agent), or a build from the module
// source at SrcDir (default: the module that holds the working directory)
// into CacheDir.
type Source struct {
	Binary   string
	Dist     string
	SrcDir   string
	CacheDir string
	Version  string // -X internal/version.Version for builds; "" leaves it out
}

// AgentBinary returns the path of the agent built for arch, building it
// when needed. A given binary is checked to be a Linux ELF executable of
// arch's machine, so a camera is never sent an amd64 file.
func (s Source) AgentBinary(ctx context.Context, arch Arch) (string, error) {
	switch {
	case s.Binary != "":
		return s.Binary, checkELF(s.Binary, arch)
	case s.Dist != "":
		p := filepath.Join(s.Dist, "linux-"+arch.Name, "halite-agent")
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("agent for %s: %w (run make cross, or give --agent-binary)", arch.Name, err)
		}
		return p, checkELF(p, arch)
	}
	src := s.SrcDir
	if src == "" {
		var err error
		if src, err = findModule(); err != nil {
			return "", err
		}
	}
	cache := s.CacheDir
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("build agent: no cache directory: %w", err)
		}
		cache = filepath.Join(dir, "halite-flash")
	}
	out := filepath.Join(cache, "linux-"+arch.Name, "halite-agent")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("build agent: %w", err)
	}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch.GOARCH, "GOARM="+arch.GOARM, "GOMIPS="+arch.GOMIPS)
	args := []string{"build", "-trimpath"}
	if arch.Small {
		// The trimmed standard library, as the Makefile's cross target
		// builds it (third_party/gotrim/HALITE.md); refused, failing the
		// build, for a Go the trims were not made for.
		overlay := filepath.Join(cache, "gotrim-overlay.json")
		if err := gotrim.WriteForModule(ctx, "go", src, env, overlay); err != nil {
			return "", fmt.Errorf("build agent for %s: %w", arch.Name, err)
		}
		args = append(args, agentGCFlagsSmall...)
		args = append(args, "-overlay="+overlay)
	} else {
		args = append(args, agentGCFlags...)
	}
	args = append(args, "-ldflags", agentLDFlags(arch, s.Version), "-o", out, "./cmd/halite-agent")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = src
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build agent for %s in %s: %w: %s", arch.Name, src, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// agentLDFlags are the linker flags of the agent for arch: stripped, the
// version stamped when given, and on 32-bit ARM the Makefile's
// AGENT_LDFLAGS_ARM (segments aligned to ARM Linux's 4 KiB pages instead
// of the linker's 64 KiB: about 0.1 MiB less flash), so halite-flash
// ships the size `make cross` measures.
func agentLDFlags(arch Arch, version string) string {
	ld := "-s -w"
	if arch.GOARCH == "arm" {
		ld += " " + agentLDFlagsARM
	}
	if version != "" {
		ld += " -X " + modulePath + "/internal/version.Version=" + version
	}
	return ld
}

// agentLDFlagsARM is the Makefile's AGENT_LDFLAGS_ARM.
const agentLDFlagsARM = "-R 0x1000"

// findModule walks up from the working directory to Halite's go.mod.
func findModule() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no agent binary: give --agent-binary FILE or --dist DIR (make cross), or run from Halite's source tree to build one")
		}
		dir = parent
	}
}

// elfMachines is the ELF machine and class of each GOARCH.
var elfMachines = map[string]struct {
	m     elf.Machine
	class elf.Class
	order string
}{
	"amd64":  {elf.EM_X86_64, elf.ELFCLASS64, "LittleEndian"},
	"arm64":  {elf.EM_AARCH64, elf.ELFCLASS64, "LittleEndian"},
	"arm":    {elf.EM_ARM, elf.ELFCLASS32, "LittleEndian"},
	"mipsle": {elf.EM_MIPS, elf.ELFCLASS32, "LittleEndian"},
}

// CheckELF checks that path is a Linux ELF executable for arch's machine,
// class and byte order.
func CheckELF(path string, arch Arch) error { return checkELF(path, arch) }

// checkELF checks that path is a Linux executable for arch.
func checkELF(path string, arch Arch) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("agent binary %s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	want, ok := elfMachines[arch.GOARCH]
	if !ok {
		return nil
	}
	if f.Machine != want.m || f.Class != want.class || f.ByteOrder.String() != want.order {
		return fmt.Errorf("agent binary %s is for %v %v %v, not %s", path, f.Machine, f.Class, f.ByteOrder, arch.Name)
	}
	return nil
}
