package pkg

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/ipk"

	"github.com/halite-fleet/halite/firmware"
)

//go:embed files
var embedded embed.FS

// Formats are the package formats made.
var Formats = []string{"deb", "ipk"}

// Kinds are the packages made: the agent (devices, gateways), a relay
// (relay VMs: the agent with a relay: section, run by halite-relay.service;
// it depends on the agent's package for the binary) and the master with
// the operator's programs.
var Kinds = []string{"agent", "master", "relay"}

// DefaultMaintainer is the Maintainer field when none is given. The
// .invalid domain says that it is a placeholder: give yours with
// --maintainer for packages you publish.
const DefaultMaintainer = "Halite <packages@halite.invalid>"

// debArch is the Debian architecture of each firmware.Arch. armv6 is
// armhf as Raspberry Pi OS names its ARMv6 systems (Pi 1, Zero): Debian's
// own armhf needs ARMv7, where the armv7 build is the one to use.
var debArch = map[string]string{
	"amd64":  "amd64",
	"arm64":  "arm64",
	"armv7":  "armhf",
	"armv6":  "armhf",
	"mipsle": "mipsel",
}

// ipkArch is the OpenWrt package architecture (opkg's "arch" lines, the
// image builders' ARCH_PACKAGES) given to each firmware.Arch by default:
// the one of the most targets in OpenWrt 24.10. One static binary runs on
// every CPU of its Arch, so the same files fit the other names: give one
// with --pkg-arch (`opkg print-architecture` on the device says which):
//
//	amd64   x86_64                     x86/64
//	arm64   aarch64_cortex-a53         mediatek/filogic, mt7622, qualcommax/ipq807x, bcm27xx/bcm2710, mvebu/cortexa53, ...
//	        (aarch64_cortex-a72: bcm2711, mvebu/cortexa72; aarch64_generic: armsr/armv8, rockchip)
//	armv7   arm_cortex-a7_neon-vfpv4   ipq40xx, mediatek/mt7623, sunxi/cortexa7, bcm27xx/bcm2709, imx/cortexa7, ...
//	        (arm_cortex-a9_vfpv3-d16: mvebu/cortexa9; arm_cortex-a15_neon-vfpv4: ipq806x, armsr/armv7;
//	        arm_cortex-a9 (bcm53xx) has no FPU, which Go's ARMv6 and v7 builds need)
//	armv6   arm_arm1176jzf-s_vfp       bcm27xx/bcm2708 (Raspberry Pi 1, Zero)
//	mipsle  mipsel_24kc                ramips/mt7621, mt7620, mt76x8, rt305x (softfloat: no FPU needed)
var ipkArch = map[string]string{
	"amd64":  "x86_64",
	"arm64":  "aarch64_cortex-a53",
	"armv7":  "arm_cortex-a7_neon-vfpv4",
	"armv6":  "arm_arm1176jzf-s_vfp",
	"mipsle": "mipsel_24kc",
}

// Arch is the package architecture for arch in format ("deb" or "ipk").
func Arch(format string, arch firmware.Arch) string {
	if format == "ipk" {
		return ipkArch[arch.Name]
	}
	return debArch[arch.Name]
}

// Spec says which package to make.
type Spec struct {
	Format string // deb or ipk
	Kind   string // agent, master or relay
	Arch   firmware.Arch
	// Version is the release, a tag or a `git describe`; Version() makes
	// it valid.
	Version string
	// BinDir holds the binaries: a `make cross` output directory
	// (dist/linux-ARCH).
	BinDir     string
	Maintainer string // "" is DefaultMaintainer
	// PkgArch is the package's architecture instead of Arch(Format, Arch).
	PkgArch string
	// MTime is the files' time; zero is SOURCE_DATE_EPOCH, else now.
	MTime time.Time
}

var pkgArchRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.+-]*$`)

// Check says what is wrong with s, in words for a command line.
func (s Spec) Check() error {
	if !contains(Formats, s.Format) {
		return fmt.Errorf("unknown format %q (known: %s)", s.Format, strings.Join(Formats, ", "))
	}
	if !contains(Kinds, s.Kind) {
		return fmt.Errorf("unknown kind %q (known: %s)", s.Kind, strings.Join(Kinds, ", "))
	}
	if _, err := firmware.LookupArch(s.Arch.Name); err != nil {
		return err
	}
	if s.Format == "ipk" && s.Kind != "agent" {
		return fmt.Errorf("kind %s: .ipk packages are for OpenWrt devices and carry the agent only; the %s is packaged as a .deb", s.Kind, s.Kind)
	}
	if s.Kind == "relay" && s.Arch.Small {
		return fmt.Errorf("kind relay: the %s agent is built without the relay (cmd/halite-agent/norelay.go); relays are packaged for amd64 and arm64", s.Arch.Name)
	}
	if s.PkgArch != "" && !pkgArchRE.MatchString(s.PkgArch) {
		return fmt.Errorf("package architecture %q: want lower-case letters, digits and _ . + -", s.PkgArch)
	}
	if strings.ContainsAny(s.Maintainer, "\r\n") {
		return fmt.Errorf("maintainer %q: one line, NAME <EMAIL>", s.Maintainer)
	}
	if s.BinDir == "" && s.Kind != "relay" {
		return errors.New("no binary directory given")
	}
	if _, err := Version(s.Version); err != nil {
		return err
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Result is a package made.
type Result struct {
	Path    string
	Name    string // the package's name: halite-agent, ...
	Version string // as in its control file
	Arch    string // as in its control file
	Size    int64
}

// kind is what one Kind's package carries.
type kind struct {
	name     string   // the package and its service
	bins     []string // programs in /usr/bin
	links    []string // symlinks in /usr/bin to bins[0] (multi-call names)
	conf     string   // the configuration file installed
	example  string   // its example, in files/
	unit     string   // the systemd unit, in firmware/service
	guard    bool     // not started while conf is the example
	hint     string   // what to set in conf
	depends  bool     // depends on halite-agent of the same version
	logFile  string
	cacheDir string
	pkiDir   string
	summary  string
}

var kinds = map[string]kind{
	"agent": {
		name: "halite-agent", bins: []string{"halite-agent"}, links: []string{"halite-call"},
		conf: "/etc/halite/agent", example: "agent.example", unit: "halite-agent.service", guard: true,
		hint:    "set master and master_finger",
		logFile: "/var/log/halite/agent", cacheDir: "/var/cache/halite/agent", pkiDir: "/etc/halite/pki/agent",
		summary: "Halite agent: runs the jobs and states a Halite master sends",
	},
	"relay": {
		name: "halite-relay", depends: true,
		conf: "/etc/halite/relay/agent", example: "relay.example", unit: "halite-relay.service", guard: true,
		hint:    "set master and master_finger",
		logFile: "/var/log/halite/relay", cacheDir: "/var/cache/halite/relay", pkiDir: "/etc/halite/pki/relay",
		summary: "Halite relay: a site's devices reach the Halite master through it",
	},
	"master": {
		name: "halite-master", bins: []string{"halite-master", "halite", "halite-key", "halite-run", "halite-flash"},
		conf: "/etc/halite/master", example: "master.example", unit: "halite-master.service",
		logFile: "/var/log/halite/master", cacheDir: "/var/cache/halite/master", pkiDir: "/etc/halite/pki/master",
		summary: "Halite master: sends jobs and states to the Halite agents of a fleet",
	},
}

const description = `%s
 Halite manages fleets of devices (cameras, gateways, routers) with Salt's
 states and execution modules, over QUIC, from one static binary a device.`

// FileName is the package's file name: NAME_VERSION_ARCH.FORMAT.
func (s Spec) FileName() (string, error) {
	v, err := Version(s.Version)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s_%s_%s.%s", kinds[s.Kind].name, fileVersion(v), s.pkgArch(), s.Format), nil
}

func (s Spec) pkgArch() string {
	if s.PkgArch != "" {
		return s.PkgArch
	}
	return Arch(s.Format, s.Arch)
}

// Build makes the package s asks for in outDir (made if missing) and
// returns it.
func Build(s Spec, outDir string) (Result, error) {
	if err := s.Check(); err != nil {
		return Result{}, err
	}
	k := kinds[s.Kind]
	version, _ := Version(s.Version)
	name, _ := s.FileName()
	res := Result{Name: k.name, Version: version, Arch: s.pkgArch(), Path: filepath.Join(outDir, name)}

	tmp, err := os.MkdirTemp("", "halite-pkg-")
	if err != nil {
		return Result{}, fmt.Errorf("package %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	info, err := s.info(k, version, tmp)
	if err != nil {
		return Result{}, fmt.Errorf("package %s: %w", name, err)
	}
	var packager nfpm.Packager = deb.Default
	if s.Format == "ipk" {
		packager = ipk.Default
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("package %s: %w", name, err)
	}
	// Written beside and renamed: a package file is never seen half made.
	part := res.Path + ".part"
	f, err := os.Create(part)
	if err != nil {
		return Result{}, fmt.Errorf("package %s: %w", name, err)
	}
	err = packager.Package(nfpm.WithDefaults(info), f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(part, res.Path)
	}
	if err != nil {
		os.Remove(part)
		return Result{}, fmt.Errorf("package %s: %w", name, err)
	}
	st, err := os.Stat(res.Path)
	if err != nil {
		return Result{}, err
	}
	res.Size = st.Size()
	return res, nil
}

// scriptData fills the maintainer scripts' templates.
type scriptData struct {
	Name, Unit, Conf, Example, Hint string
	Guard                           bool
	LogFile, CacheDir, PkiDir       string
	Start, Stop                     string // the procd script's START and STOP
}

// info is the nfpm description of the package; the files that are not on
// disk (service files, scripts, examples) are written under tmp.
func (s Spec) info(k kind, version, tmp string) (*nfpm.Info, error) {
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(tmp, name)
		return p, os.WriteFile(p, data, 0o644)
	}
	var contents files.Contents
	add := func(c *files.Content, mode os.FileMode) {
		c.FileInfo = &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: s.MTime}
		contents = append(contents, c)
	}
	// Programs.
	for _, b := range k.bins {
		p := filepath.Join(s.BinDir, b)
		if _, err := os.Stat(p); err != nil {
			hint := ""
			if s.Kind == "master" {
				hint = "; make cross builds the master's programs for amd64 and arm64 only"
			}
			return nil, fmt.Errorf("%s: %w (give --bin DIR: a make cross output such as dist/linux-%s%s)", b, err, s.Arch.Name, hint)
		}
		if err := firmware.CheckELF(p, s.Arch); err != nil {
			return nil, err
		}
		add(&files.Content{Source: p, Destination: "/usr/bin/" + b}, 0o755)
	}
	for _, l := range k.links {
		add(&files.Content{Source: k.bins[0], Destination: "/usr/bin/" + l, Type: files.TypeSymlink}, 0o777)
	}

	// Configuration: the example as a conffile, and a copy that says
	// whether it was edited (not in /usr/share/doc, which minimal images
	// leave out with dpkg's path-exclude).
	example, err := embedded.ReadFile("files/" + k.example)
	if err != nil {
		return nil, err
	}
	exPath, err := write(k.example, example)
	if err != nil {
		return nil, err
	}
	add(&files.Content{Source: exPath, Destination: k.conf, Type: files.TypeConfig}, 0o644)
	add(&files.Content{Source: exPath, Destination: "/usr/share/halite/" + k.example}, 0o644)

	sd := scriptData{Name: k.name, Unit: k.unit, Conf: k.conf, Example: "/usr/share/halite/" + k.example, Hint: k.hint,
		Guard: k.guard, LogFile: k.logFile, CacheDir: k.cacheDir, PkiDir: k.pkiDir}
	var scripts nfpm.Scripts
	logrotate := logrotateDeb
	switch s.Format {
	case "deb":
		unit, err := firmware.ServiceFile(k.unit)
		if err != nil {
			return nil, err
		}
		p, err := write(k.unit, unit)
		if err != nil {
			return nil, err
		}
		add(&files.Content{Source: p, Destination: "/usr/lib/systemd/system/" + k.unit}, 0o644)
		if k.guard {
			p, err := write("package.conf", []byte(fmt.Sprintf(dropIn, k.name, k.conf, sd.Example)))
			if err != nil {
				return nil, err
			}
			add(&files.Content{Source: p, Destination: "/usr/lib/systemd/system/" + k.unit + ".d/package.conf"}, 0o644)
		}
		for _, sc := range []struct {
			dst  *string
			name string
		}{{&scripts.PostInstall, "deb-postinst"}, {&scripts.PreRemove, "deb-prerm"}, {&scripts.PostRemove, "deb-postrm"}} {
			if *sc.dst, err = s.script(tmp, sc.name, sd); err != nil {
				return nil, err
			}
		}
	case "ipk":
		init, start, stop, err := procdScript(k, sd.Example)
		if err != nil {
			return nil, err
		}
		sd.Start, sd.Stop = start, stop
		p, err := write("init", init)
		if err != nil {
			return nil, err
		}
		add(&files.Content{Source: p, Destination: "/etc/init.d/" + k.name}, 0o755)
		for _, sc := range []struct {
			dst  *string
			name string
		}{{&scripts.PostInstall, "ipk-postinst"}, {&scripts.PreRemove, "ipk-prerm"}} {
			if *sc.dst, err = s.script(tmp, sc.name, sd); err != nil {
				return nil, err
			}
		}
		logrotate = logrotateIPK
	}
	p, err := write("logrotate", []byte(fmt.Sprintf(logrotate, k.name, k.logFile, k.name)))
	if err != nil {
		return nil, err
	}
	add(&files.Content{Source: p, Destination: "/etc/logrotate.d/" + k.name, Type: files.TypeConfig}, 0o644)
	for _, d := range []string{"/var/lib/halite", "/var/log/halite"} {
		add(&files.Content{Destination: d, Type: files.TypeDir}, 0o755)
	}

	info := &nfpm.Info{
		Name:          k.name,
		Arch:          s.pkgArch(),
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    s.Maintainer,
		Description:   fmt.Sprintf(description, k.summary),
		Homepage:      "https://github.com/halite-fleet/halite",
		MTime:         s.MTime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  scripts,
			Umask:    0o022,
		},
	}
	if info.Maintainer == "" {
		info.Maintainer = DefaultMaintainer
	}
	if k.depends {
		info.Depends = []string{"halite-agent (= " + version + ")"}
	}
	info.Deb.Arch = info.Arch
	info.IPK.Arch = info.Arch
	return info, nil
}

// script renders the maintainer script name into tmp.
func (s Spec) script(tmp, name string, sd scriptData) (string, error) {
	src, err := embedded.ReadFile("files/" + name)
	if err != nil {
		return "", err
	}
	t, err := template.New(name).Parse(string(src))
	if err != nil {
		return "", fmt.Errorf("script %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, sd); err != nil {
		return "", fmt.Errorf("script %s: %w", name, err)
	}
	p := filepath.Join(tmp, name)
	return p, os.WriteFile(p, b.Bytes(), 0o755)
}

// dropIn keeps systemd from starting an agent whose configuration is still
// the example (no master, no key pinned: it would try "salt" and trust the
// first key it is shown), at boot as well as on `systemctl start`.
const dropIn = `# From the %s package: not started while its configuration (%s)
# is still the example the package shipped (%s).
# ExecCondition (systemd 243 and later) skips the start without a failure.
[Service]
ExecCondition=/bin/sh -c '! cmp -s %[2]s %[3]s'
`

const logrotateDeb = `# logrotate for %s (from its package): the file is renamed and the
# daemon, sent SIGHUP (systemctl reload), opens a new one.
%s {
	weekly
	rotate 8
	compress
	delaycompress
	missingok
	notifempty
	postrotate
		if systemctl --quiet is-active %[3]s.service 2>/dev/null; then systemctl reload %[3]s.service; fi
	endscript
}
`

const logrotateIPK = `# logrotate for %s (from its package): the file is renamed and the
# daemon, sent SIGHUP (the init script's reload), opens a new one.
%s {
	weekly
	rotate 4
	compress
	missingok
	notifempty
	postrotate
		/etc/init.d/%[3]s reload >/dev/null 2>&1 || true
	endscript
}
`

var procdNumRE = regexp.MustCompile(`(?m)^(START|STOP)=([0-9]{2})$`)

// procdScript is firmware/files' procd script with a guard that keeps the
// agent from starting while its configuration is the example, and its
// START and STOP numbers (the rc.d links).
func procdScript(k kind, example string) (script []byte, start, stop string, err error) {
	src, err := firmware.ServiceFile("halite-agent.procd")
	if err != nil {
		return nil, "", "", err
	}
	for _, m := range procdNumRE.FindAllStringSubmatch(string(src), -1) {
		if m[1] == "START" {
			start = m[2]
		} else {
			stop = m[2]
		}
	}
	const open = "start_service() {\n"
	if start == "" || stop == "" || strings.Count(string(src), open) != 1 {
		return nil, "", "", fmt.Errorf("%w: the procd script has no START=NN, STOP=NN or one %q", fs.ErrInvalid, strings.TrimSpace(open))
	}
	guard := open + fmt.Sprintf(`	# From the package: not started while the configuration is still the
	# example it shipped.
	if [ -f %[2]s ] && [ "$(cat "%[1]s" 2>/dev/null)" = "$(cat %[2]s)" ]; then
		echo "%[3]s: %[1]s is still the example: %[4]s, then: /etc/init.d/%[3]s restart" >&2
		return 0
	fi
`, strings.Replace(k.conf, "/etc/halite", "$CONFIG_DIR", 1), example, k.name, k.hint)
	return []byte(strings.Replace(string(src), open, guard, 1)), start, stop, nil
}
