package firmware

import (
	"fmt"
	"regexp"
	"strings"
)

// Arch is a device architecture the agent is built for: the names the
// Makefile's cross target uses (dist/linux-<Name>) and the Go settings.
type Arch struct {
	Name   string // amd64, arm64, armv6, armv7, mipsle
	GOARCH string
	GOARM  string
	GOMIPS string
	// Small: inlining off everywhere (the Makefile's AGENT_GCFLAGS_SMALL),
	// for the 32-bit devices where flash is short.
	Small bool
}

// Arches are the architectures halite-flash builds and flashes, as the
// Makefile's CROSS list.
var Arches = []Arch{
	{Name: "amd64", GOARCH: "amd64"},
	{Name: "arm64", GOARCH: "arm64"},
	{Name: "armv6", GOARCH: "arm", GOARM: "6", Small: true},
	{Name: "armv7", GOARCH: "arm", GOARM: "7", Small: true},
	{Name: "mipsle", GOARCH: "mipsle", GOMIPS: "softfloat", Small: true},
}

// ArchNames lists the names of Arches, for usage messages.
func ArchNames() string {
	var n []string
	for _, a := range Arches {
		n = append(n, a.Name)
	}
	return strings.Join(n, ", ")
}

// LookupArch returns the Arch called name.
func LookupArch(name string) (Arch, error) {
	for _, a := range Arches {
		if a.Name == name {
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("unknown architecture %q (known: %s)", name, ArchNames())
}

// Endian is a device's byte order, read from the ELF header of its shell.
type Endian int

const (
	EndianUnknown Endian = iota
	Little
	Big
)

var cpuArchRE = regexp.MustCompile(`(?im)^(?:CPU architecture|model name|Processor)\s*:\s*(.*)$`)

// DetectArch names the agent build for a device from what it reports:
// `uname -m`, /proc/cpuinfo (ARM v6 or v7 when uname says only "arm") and
// the byte order (MIPS comes in both; only little-endian is built). An
// architecture without a build is an error that says what the device is.
func DetectArch(unameM, cpuinfo string, endian Endian) (Arch, error) {
	m := strings.ToLower(strings.TrimSpace(unameM))
	name := ""
	switch {
	case m == "x86_64" || m == "amd64":
		name = "amd64"
	case m == "aarch64" || m == "arm64":
		name = "arm64"
	case strings.HasPrefix(m, "armv7") || m == "armv8l":
		// armv8l: a 64-bit CPU running a 32-bit kernel; armv7 code runs.
		name = "armv7"
	case strings.HasPrefix(m, "armv6"):
		name = "armv6"
	case m == "arm" || strings.HasPrefix(m, "armv"):
		name = armFromCPUInfo(cpuinfo)
		if name == "" {
			return Arch{}, fmt.Errorf("unknown arch: uname -m says %q and /proc/cpuinfo names no ARM v6 or later (Go needs ARMv6 at least); no agent build fits", unameM)
		}
	case m == "mips" || m == "mipsel" || m == "mipsle":
		e := endian
		if m == "mipsel" || m == "mipsle" {
			e = Little
		}
		switch e {
		case Little:
			name = "mipsle"
		case Big:
			return Arch{}, fmt.Errorf("unknown arch: big-endian MIPS (uname -m %q): only mipsle is built; add linux-mips to the Makefile's CROSS and Arches", unameM)
		default:
			return Arch{}, fmt.Errorf("unknown arch: MIPS (uname -m %q) of unknown byte order (no od or hexdump on the device?): give --arch mipsle if it is little-endian", unameM)
		}
	case m == "":
		return Arch{}, fmt.Errorf("unknown arch: uname -m printed nothing")
	default:
		return Arch{}, fmt.Errorf("unknown arch: no agent build for %q (built: %s); give --arch to force one", unameM, ArchNames())
	}
	return LookupArch(name)
}

// armFromCPUInfo reads the ARM architecture version from /proc/cpuinfo:
// "CPU architecture: 7" or a model name such as "ARMv6-compatible processor".
func armFromCPUInfo(cpuinfo string) string {
	for _, sm := range cpuArchRE.FindAllStringSubmatch(cpuinfo, -1) {
		v := strings.ToLower(strings.TrimSpace(sm[1]))
		switch {
		case v == "7" || v == "8" || strings.Contains(v, "armv7") || strings.Contains(v, "armv8"):
			return "armv7"
		case v == "6" || v == "6tej" || strings.Contains(v, "armv6"):
			return "armv6"
		}
	}
	return ""
}

// ParseEndian reads the byte order from od's output of ELF header byte 5
// (EI_DATA: 1 little, 2 big), as the probe prints it.
func ParseEndian(s string) Endian {
	switch strings.TrimLeft(strings.TrimSpace(s), "0") {
	case "1":
		return Little
	case "2":
		return Big
	}
	return EndianUnknown
}
