package pkg

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/firmware"
)

func TestVersion(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1.2.3", "1.2.3"},
		{"v1.2.3", "1.2.3"},
		{"v1.2.0-rc1", "1.2.0~rc1"},
		{"v1.2-3-gabc1234", "1.2+3.gabc1234"},
		{"v1.2-3-gabc1234-dirty", "1.2+3.gabc1234.dirty"},
		{"v1.2.0-rc1-14-g0123abcd", "1.2.0~rc1+14.g0123abcd"},
		{"545d864", "0~git.545d864"},
		{"545d864-dirty", "0~git.545d864.dirty"},
		{"2:1.0", "2:1.0"},
		{"0.0.0-12-g545d864", "0.0.0+12.g545d864"},
	} {
		got, err := Version(c.in)
		if err != nil || got != c.want {
			t.Errorf("Version(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "devel", "vx", "1.2 3", "1_2", "1.2/3", "-1"} {
		if v, err := Version(bad); err == nil {
			t.Errorf("Version(%q) = %q, want an error", bad, v)
		}
	}
}

// TestVersionOrder checks with dpkg itself that converted versions sort as
// the releases do.
func TestVersionOrder(t *testing.T) {
	need(t, "dpkg")
	order := []string{"545d864", "v0.9", "v1.2.0-rc1", "v1.2.0-rc1-3-gabc1234", "v1.2.0", "v1.2.0-3-gabc1234", "v1.2.0-10-g0000aaa", "v1.3"}
	for i := 1; i < len(order); i++ {
		a, _ := Version(order[i-1])
		b, _ := Version(order[i])
		if out, err := exec.Command("dpkg", "--compare-versions", a, "lt", b).CombinedOutput(); err != nil {
			t.Errorf("dpkg --compare-versions %s lt %s (from %s, %s): %v %s", a, b, order[i-1], order[i], err, out)
		}
	}
}

func TestArchNames(t *testing.T) {
	want := map[string][2]string{
		"amd64": {"amd64", "x86_64"}, "arm64": {"arm64", "aarch64_cortex-a53"}, "armv7": {"armhf", "arm_cortex-a7_neon-vfpv4"},
		"armv6": {"armhf", "arm_arm1176jzf-s_vfp"}, "mipsle": {"mipsel", "mipsel_24kc"},
	}
	for _, a := range firmware.Arches {
		w, ok := want[a.Name]
		if !ok {
			t.Fatalf("arch %s has no package architecture in this test", a.Name)
		}
		if d, i := Arch("deb", a), Arch("ipk", a); d != w[0] || i != w[1] {
			t.Errorf("%s: deb %q ipk %q, want %q %q", a.Name, d, i, w[0], w[1])
		}
	}
}

func TestSpecCheck(t *testing.T) {
	armv7, _ := firmware.LookupArch("armv7")
	amd64, _ := firmware.LookupArch("amd64")
	ok := Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "1.0", BinDir: "x"}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Format = "rpm" }, `unknown format "rpm" (known: deb, ipk)`},
		{func(s *Spec) { s.Kind = "minion" }, `unknown kind "minion" (known: agent, master, relay)`},
		{func(s *Spec) { s.Arch = firmware.Arch{Name: "sparc"} }, `unknown architecture "sparc"`},
		{func(s *Spec) { s.Format, s.Kind = "ipk", "master" }, ".ipk packages are for OpenWrt devices and carry the agent only"},
		{func(s *Spec) { s.Kind, s.Arch = "relay", armv7 }, "the armv7 agent is built without the relay"},
		{func(s *Spec) { s.Version = "devel" }, `version "devel": not a package version`},
		{func(s *Spec) { s.PkgArch = "ARM HF" }, `package architecture "ARM HF"`},
		{func(s *Spec) { s.BinDir = "" }, "no binary directory"},
	} {
		s := ok
		c.mod(&s)
		err := s.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v, want %q", s, err, c.want)
		}
		if _, err := Build(s, t.TempDir()); err == nil {
			t.Errorf("Build(%+v) made a package", s)
		}
	}
}

var (
	tinyMu   sync.Mutex
	tinyBins = map[string]string{}
)

// binDir is a directory of the named programs for arch: copies of a real
// ELF executable built for it (cmd/halite-* take minutes to cross-build;
// the packages do not run them).
func binDir(t *testing.T, archName string, names ...string) string {
	t.Helper()
	arch, err := firmware.LookupArch(archName)
	if err != nil {
		t.Fatal(err)
	}
	tinyMu.Lock()
	bin, ok := tinyBins[archName]
	if !ok {
		bin = filepath.Join(os.TempDir(), "halite-pkg-test-tiny-"+archName+"-"+strings.ReplaceAll(t.Name(), "/", "_"))
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./testdata/tiny")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch.GOARCH, "GOARM="+arch.GOARM, "GOMIPS="+arch.GOMIPS)
		if out, err := cmd.CombinedOutput(); err != nil {
			tinyMu.Unlock()
			t.Fatalf("build tiny for %s: %v\n%s", archName, err, out)
		}
		tinyBins[archName] = bin
	}
	tinyMu.Unlock()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, b := range tinyBins {
		os.Remove(b)
	}
	os.Exit(code)
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: tools/ci/deps.sh installs it", tool)
			}
			t.Skipf("%s is not installed (apt-get install dpkg)", tool)
		}
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func build(t *testing.T, s Spec) Result {
	t.Helper()
	r, err := Build(s, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(r.Path + ".part"); err == nil {
		t.Errorf("%s.part left behind", r.Path)
	}
	t.Logf("%s: %d bytes (%.2f MiB)", filepath.Base(r.Path), r.Size, float64(r.Size)/(1<<20))
	return r
}

func fields(t *testing.T, deb string, names ...string) map[string]string {
	t.Helper()
	out := run(t, "dpkg-deb", append([]string{"--field", deb}, names...)...)
	m := map[string]string{}
	if len(names) == 1 { // the value alone
		m[names[0]] = strings.TrimSpace(out)
		return m
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		m[k] = v
	}
	return m
}

// contents is dpkg-deb --contents as path -> "mode link-target".
func contents(t *testing.T, deb string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "--contents", deb)), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("dpkg-deb --contents line %q", l)
		}
		path, rest := f[5], f[0]
		if len(f) >= 8 && f[6] == "->" {
			rest += " " + f[7]
		}
		if !strings.HasPrefix(f[1], "root/root") {
			t.Errorf("%s owned by %s, want root/root", path, f[1])
		}
		m[strings.TrimSuffix(path, "/")] = rest
	}
	return m
}

// dpkgRoot is an empty dpkg database under a new directory, for
// dpkg --root.
func dpkgRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		os.WriteFile(filepath.Join(root, f), nil, 0o644)
	}
	return root
}

// dpkg runs dpkg on root as a package installer into an image does:
// --force-script-chrootless runs the maintainer scripts on this system
// with DPKG_ROOT=root (they act on root only), and --force-not-root lets a
// user without root do it.
func dpkg(t *testing.T, root string, args ...string) string {
	t.Helper()
	return run(t, "dpkg", append([]string{"--root=" + root, "--force-not-root", "--force-script-chrootless",
		"--log=/dev/null", "--force-confdef", "--force-confold"}, args...)...)
}

func TestDebAgent(t *testing.T) {
	need(t, "dpkg", "dpkg-deb")
	amd64, _ := firmware.LookupArch("amd64")
	bins := binDir(t, "amd64", "halite-agent")
	s := Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "v1.2-3-gabc1234", BinDir: bins}
	r := build(t, s)
	if filepath.Base(r.Path) != "halite-agent_1.2+3.gabc1234_amd64.deb" {
		t.Errorf("file %s", r.Path)
	}
	f := fields(t, r.Path, "Package", "Version", "Architecture", "Maintainer", "Section", "Priority", "Depends")
	for k, v := range map[string]string{"Package": "halite-agent", "Version": "1.2+3.gabc1234", "Architecture": "amd64",
		"Maintainer": DefaultMaintainer, "Section": "admin", "Priority": "optional"} {
		if f[k] != v {
			t.Errorf("%s: %q, want %q", k, f[k], v)
		}
	}
	if f["Depends"] != "" {
		t.Errorf("Depends: %q: the agent is static and depends on nothing", f["Depends"])
	}
	c := contents(t, r.Path)
	for path, mode := range map[string]string{
		"./usr/bin/halite-agent":                                       "-rwxr-xr-x",
		"./usr/bin/halite-call":                                        "lrwxrwxrwx halite-agent",
		"./etc/halite/agent":                                           "-rw-r--r--",
		"./usr/share/halite/agent.example":                             "-rw-r--r--",
		"./usr/lib/systemd/system/halite-agent.service":                "-rw-r--r--",
		"./usr/lib/systemd/system/halite-agent.service.d/package.conf": "-rw-r--r--",
		"./etc/logrotate.d/halite-agent":                               "-rw-r--r--",
		"./var/lib/halite":                                             "drwxr-xr-x",
		"./var/log/halite":                                             "drwxr-xr-x",
	} {
		if c[path] != mode {
			t.Errorf("%s: %q, want %q", path, c[path], mode)
		}
	}
	info := run(t, "dpkg-deb", "--info", r.Path)
	for _, want := range []string{"conffiles", "postinst", "prerm", "postrm"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb --info has no %s:\n%s", want, info)
		}
	}
	ctrl := t.TempDir()
	run(t, "dpkg-deb", "--control", r.Path, ctrl)
	conf, _ := os.ReadFile(filepath.Join(ctrl, "conffiles"))
	if got := strings.Fields(string(conf)); strings.Join(got, " ") != "/etc/halite/agent /etc/logrotate.d/halite-agent" {
		t.Errorf("conffiles %q", got)
	}
	for _, sc := range []string{"postinst", "prerm", "postrm"} {
		run(t, "sh", "-n", filepath.Join(ctrl, sc))
	}

	// Installed into an empty root as an image builder does.
	root := dpkgRoot(t)
	out := dpkg(t, root, "--install", r.Path)
	t.Logf("dpkg --install: %s", out)
	wants := filepath.Join(root, "etc/systemd/system/multi-user.target.wants/halite-agent.service")
	if l, err := os.Readlink(wants); err != nil || !strings.HasSuffix(l, "/systemd/system/halite-agent.service") {
		t.Errorf("postinst did not enable the unit in the root: %q %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(root, "usr/bin/halite-call")); err != nil || l != "halite-agent" {
		t.Errorf("halite-call -> %q %v", l, err)
	}
	if got := run(t, filepath.Join(root, "usr/bin/halite-call")); got != "halite-call\n" {
		t.Errorf("halite-call ran as %q: argv[0] is what the multi-call agent reads", got)
	}
	if st := strings.TrimSpace(run(t, "dpkg-query", "--admindir="+root+"/var/lib/dpkg", "-W", "-f=${Status} ${Version}", "halite-agent")); st != "install ok installed 1.2+3.gabc1234" {
		t.Errorf("status %q", st)
	}

	// An upgrade keeps the configuration the operator edited.
	edited := "master: m.example.net\nmaster_finger: \"ab:cd\"\n"
	os.WriteFile(filepath.Join(root, "etc/halite/agent"), []byte(edited), 0o644)
	s.Version = "v1.3"
	r2 := build(t, s)
	dpkg(t, root, "--install", r2.Path)
	if b, _ := os.ReadFile(filepath.Join(root, "etc/halite/agent")); string(b) != edited {
		t.Errorf("upgrade replaced the edited configuration: %q", b)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/halite/agent.dpkg-new")); err == nil {
		t.Errorf("upgrade left agent.dpkg-new: the example did not change")
	}
	if st := run(t, "dpkg-query", "--admindir="+root+"/var/lib/dpkg", "-W", "-f=${Version}", "halite-agent"); st != "1.3" {
		t.Errorf("version after upgrade %q", st)
	}

	// Removed: the unit is disabled, the configuration stays; purged: gone.
	dpkg(t, root, "--remove", "halite-agent")
	if _, err := os.Lstat(wants); err == nil {
		t.Errorf("remove left %s", wants)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/halite-agent")); err == nil {
		t.Errorf("remove left the binary")
	}
	if _, err := os.Stat(filepath.Join(root, "etc/halite/agent")); err != nil {
		t.Errorf("remove took the configuration: %v", err)
	}
	os.MkdirAll(filepath.Join(root, "var/cache/halite/agent"), 0o700)
	os.WriteFile(filepath.Join(root, "var/log/halite/agent.1"), []byte("x"), 0o644)
	dpkg(t, root, "--purge", "halite-agent")
	for _, p := range []string{"etc/halite/agent", "var/cache/halite/agent", "var/log/halite/agent.1"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("purge left %s", p)
		}
	}
}

// TestDebSystemd checks the packaged unit and its drop-in with systemd's
// own reader, and that the drop-in's condition holds off exactly while the
// configuration is the example.
func TestDebSystemd(t *testing.T) {
	need(t, "dpkg-deb", "systemd-analyze")
	amd64, _ := firmware.LookupArch("amd64")
	r := build(t, Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "1.0", BinDir: binDir(t, "amd64", "halite-agent")})
	root := t.TempDir()
	run(t, "dpkg-deb", "-x", r.Path, root)
	dropIn, _ := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/halite-agent.service.d/package.conf"))
	m := regexp.MustCompile(`(?m)^ExecCondition=/bin/sh -c '(.*)'$`).FindSubmatch(dropIn)
	if m == nil {
		t.Fatalf("drop-in has no ExecCondition:\n%s", dropIn)
	}
	cond := strings.NewReplacer("/etc/halite/agent", root+"/etc/halite/agent", "/usr/share/halite/", root+"/usr/share/halite/").Replace(string(m[1]))
	if err := exec.Command("sh", "-c", cond).Run(); err == nil {
		t.Errorf("condition %q holds with the example configuration", cond)
	}
	os.WriteFile(filepath.Join(root, "etc/halite/agent"), []byte("master: m\n"), 0o644)
	if err := exec.Command("sh", "-c", cond).Run(); err != nil {
		t.Errorf("condition %q fails with an edited configuration: %v", cond, err)
	}
	checkLogrotate(t, filepath.Join(root, "etc/logrotate.d/halite-agent"))

	// systemd-analyze verify reads the unit with its drop-in (ExecStart's
	// binary must exist: the root's).
	unit := filepath.Join(t.TempDir(), "halite-agent.service")
	b, _ := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system/halite-agent.service"))
	os.WriteFile(unit, bytes.ReplaceAll(b, []byte("/usr/bin/halite-agent"), []byte(root+"/usr/bin/halite-agent")), 0o644)
	os.MkdirAll(unit+".d", 0o755)
	os.WriteFile(filepath.Join(unit+".d", "package.conf"), dropIn, 0o644)
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", unit)
	out, err := cmd.CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("halite-agent.service:")) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestDebMasterRelay(t *testing.T) {
	need(t, "dpkg", "dpkg-deb")
	arm64, _ := firmware.LookupArch("arm64")
	amd64, _ := firmware.LookupArch("amd64")
	master := []string{"halite-master", "halite", "halite-key", "halite-run", "halite-flash"}

	// arm64: the binaries are checked to be aarch64.
	r := build(t, Spec{Format: "deb", Kind: "master", Arch: arm64, Version: "2.0.1", BinDir: binDir(t, "arm64", master...)})
	if f := fields(t, r.Path, "Package", "Architecture"); f["Package"] != "halite-master" || f["Architecture"] != "arm64" {
		t.Errorf("fields %v", f)
	}
	c := contents(t, r.Path)
	for _, b := range master {
		if c["./usr/bin/"+b] != "-rwxr-xr-x" {
			t.Errorf("/usr/bin/%s: %q", b, c["./usr/bin/"+b])
		}
	}
	for _, p := range []string{"./usr/lib/systemd/system/halite-master.service", "./etc/halite/master", "./etc/logrotate.d/halite-master"} {
		if c[p] == "" {
			t.Errorf("no %s", p)
		}
	}
	if c["./usr/lib/systemd/system/halite-master.service.d/package.conf"] != "" {
		t.Errorf("the master's defaults are a working master: no example guard")
	}
	_, err := Build(Spec{Format: "deb", Kind: "master", Arch: arm64, Version: "2.0.1", BinDir: binDir(t, "arm64", "halite-master")}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "halite: ") || !strings.Contains(err.Error(), "make cross builds the master's programs for amd64 and arm64 only") {
		t.Errorf("master without halite: %v", err)
	}

	// amd64: the master and a relay, installed into a root; the relay
	// needs the agent of its version.
	mr := build(t, Spec{Format: "deb", Kind: "master", Arch: amd64, Version: "2.0.1", BinDir: binDir(t, "amd64", master...)})
	ar := build(t, Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "2.0.1", BinDir: binDir(t, "amd64", "halite-agent")})
	rr := build(t, Spec{Format: "deb", Kind: "relay", Arch: amd64, Version: "2.0.1"})
	if f := fields(t, rr.Path, "Depends"); f["Depends"] != "halite-agent (= 2.0.1)" {
		t.Errorf("relay Depends %q", f["Depends"])
	}
	rc := contents(t, rr.Path)
	for _, p := range []string{"./etc/halite/relay/agent", "./usr/lib/systemd/system/halite-relay.service", "./usr/lib/systemd/system/halite-relay.service.d/package.conf"} {
		if rc[p] == "" {
			t.Errorf("relay: no %s", p)
		}
	}
	root := dpkgRoot(t)
	old := build(t, Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "1.0", BinDir: binDir(t, "amd64", "halite-agent")})
	dpkg(t, root, "--install", old.Path)
	cmd := exec.Command("dpkg", "--root="+root, "--force-not-root", "--force-script-chrootless", "--log=/dev/null", "--install", rr.Path)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "halite-agent (= 2.0.1)") {
		t.Errorf("relay installed beside agent 1.0: %v\n%s", err, out)
	}
	dpkg(t, root, "--install", mr.Path, ar.Path, rr.Path)
	for _, u := range []string{"halite-master", "halite-agent", "halite-relay"} {
		if _, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants", u+".service")); err != nil {
			t.Errorf("%s not enabled: %v", u, err)
		}
	}
}

// TestExampleConfigs loads the packaged configurations with the daemons'
// own loaders: no error and no warning.
func TestExampleConfigs(t *testing.T) {
	for _, c := range []struct{ file, dir string }{{"agent.example", "agent"}, {"relay.example", "agent"}, {"master.example", "master"}} {
		b, err := embedded.ReadFile("files/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, c.dir), b, 0o644)
		var warns []config.Warning
		warn := func(w config.Warning) { warns = append(warns, w) }
		if c.dir == "master" {
			_, err = config.LoadMaster(dir, warn)
		} else {
			var a *config.Agent
			a, err = config.LoadAgent(dir, warn)
			if err == nil && c.file == "relay.example" && (a.PkiDir != "/etc/halite/pki/relay" || a.Relay == nil) {
				t.Errorf("relay example: pki_dir %q, relay %v", a.PkiDir, a.Relay)
			}
		}
		if err != nil || len(warns) > 0 {
			t.Errorf("%s: %v, warnings %v", c.file, err, warns)
		}
	}
}

// ipkFile is one member of an .ipk's data or control archive.
type ipkFile struct {
	hdr  *tar.Header
	data []byte
}

func untgz(t *testing.T, b []byte) map[string]ipkFile {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	m := map[string]ipkFile{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return m
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		m[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = ipkFile{h, data}
	}
}

func TestIPK(t *testing.T) {
	for _, c := range []struct {
		arch, pkgArch string
		machine       elf.Machine
	}{{"armv7", "arm_cortex-a7_neon-vfpv4", elf.EM_ARM}, {"mipsle", "mipsel_24kc", elf.EM_MIPS}} {
		t.Run(c.arch, func(t *testing.T) {
			arch, _ := firmware.LookupArch(c.arch)
			r := build(t, Spec{Format: "ipk", Kind: "agent", Arch: arch, Version: "v1.2-3-gabc1234", BinDir: binDir(t, c.arch, "halite-agent")})
			if filepath.Base(r.Path) != "halite-agent_1.2+3.gabc1234_"+c.pkgArch+".ipk" {
				t.Errorf("file %s", r.Path)
			}
			raw, _ := os.ReadFile(r.Path)
			outer := untgz(t, raw)
			if string(outer["debian-binary"].data) != "2.0\n" {
				t.Errorf("debian-binary %q", outer["debian-binary"].data)
			}
			control := untgz(t, outer["control.tar.gz"].data)
			data := untgz(t, outer["data.tar.gz"].data)

			ctl := string(control["control"].data)
			for _, want := range []string{"Package: halite-agent\n", "Version: 1.2+3.gabc1234\n", "Architecture: " + c.pkgArch + "\n", "Maintainer: " + DefaultMaintainer + "\n"} {
				if !strings.Contains(ctl, want) {
					t.Errorf("control has no %q:\n%s", want, ctl)
				}
			}
			if got := strings.Fields(string(control["conffiles"].data)); strings.Join(got, " ") != "/etc/halite/agent /etc/logrotate.d/halite-agent" {
				t.Errorf("conffiles %q", got)
			}
			for _, sc := range []string{"postinst", "prerm"} {
				f, ok := control[sc]
				if !ok || f.hdr.Mode&0o111 == 0 {
					t.Errorf("%s missing or not executable", sc)
				}
			}

			bin := data["usr/bin/halite-agent"]
			if bin.hdr == nil || bin.hdr.Mode&0o777 != 0o755 {
				t.Fatalf("usr/bin/halite-agent: %+v", bin.hdr)
			}
			ef, err := elf.NewFile(bytes.NewReader(bin.data))
			if err != nil {
				t.Fatal(err)
			}
			if ef.Machine != c.machine || ef.Class != elf.ELFCLASS32 || ef.ByteOrder.String() != "LittleEndian" {
				t.Errorf("halite-agent is %v %v %v", ef.Machine, ef.Class, ef.ByteOrder)
			}
			if h := data["usr/bin/halite-call"].hdr; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "halite-agent" {
				t.Errorf("halite-call: %+v", h)
			}
			init := data["etc/init.d/halite-agent"]
			if init.hdr == nil || init.hdr.Mode&0o777 != 0o755 {
				t.Fatalf("etc/init.d/halite-agent: %+v", init.hdr)
			}
			for _, want := range []string{"#!/bin/sh /etc/rc.common\n", "USE_PROCD=1", "procd_set_param command \"$PROG\" -c \"$CONFIG_DIR\"",
				`"$(cat "$CONFIG_DIR/agent" 2>/dev/null)" = "$(cat /usr/share/halite/agent.example)"`} {
				if !strings.Contains(string(init.data), want) {
					t.Errorf("init script has no %q:\n%s", want, init.data)
				}
			}
			for _, p := range []string{"etc/halite/agent", "usr/share/halite/agent.example", "etc/logrotate.d/halite-agent"} {
				if data[p].hdr == nil {
					t.Errorf("no %s", p)
				}
			}
			for _, d := range []string{"var/lib/halite", "var/log/halite"} {
				if h := data[d].hdr; h == nil || h.Typeflag != tar.TypeDir {
					t.Errorf("%s: %+v", d, h)
				}
			}
			if _, ok := data["usr/lib/systemd/system/halite-agent.service"]; ok {
				t.Errorf("an .ipk with a systemd unit")
			}

			// The scripts, run as an image builder runs them: the init
			// script is enabled in the image, as rc.common's enable does.
			dir := t.TempDir()
			for _, f := range []string{"postinst", "prerm", "init"} {
				b := control[f].data
				if f == "init" {
					b = init.data
				}
				os.WriteFile(filepath.Join(dir, f), b, 0o755)
				run(t, "sh", "-n", filepath.Join(dir, f))
				if _, err := exec.LookPath("busybox"); err == nil {
					run(t, "busybox", "sh", "-n", filepath.Join(dir, f))
				}
			}
			logrotate := filepath.Join(t.TempDir(), "halite-agent")
			os.WriteFile(logrotate, data["etc/logrotate.d/halite-agent"].data, 0o644)
			checkLogrotate(t, logrotate)

			// BusyBox's ash is OpenWrt's shell.
			need(t, "busybox")
			img := t.TempDir()
			cmd := exec.Command("busybox", "sh", filepath.Join(dir, "postinst"))
			cmd.Env = append(os.Environ(), "IPKG_INSTROOT="+img)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("postinst: %v %s", err, out)
			}
			for _, l := range []string{"S95halite-agent", "K10halite-agent"} {
				if got, err := os.Readlink(filepath.Join(img, "etc/rc.d", l)); err != nil || got != "../init.d/halite-agent" {
					t.Errorf("rc.d/%s -> %q %v", l, got, err)
				}
			}
			cmd = exec.Command("busybox", "sh", filepath.Join(dir, "prerm"))
			cmd.Env = append(os.Environ(), "IPKG_INSTROOT="+img)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("prerm: %v %s", err, out)
			}
			if ents, _ := os.ReadDir(filepath.Join(img, "etc/rc.d")); len(ents) != 0 {
				t.Errorf("prerm left %v", ents)
			}
		})
	}
}

// TestWrongArchBinary: an amd64 program is never packaged as armhf.
func TestWrongArchBinary(t *testing.T) {
	armv7, _ := firmware.LookupArch("armv7")
	_, err := Build(Spec{Format: "deb", Kind: "agent", Arch: armv7, Version: "1.0", BinDir: binDir(t, "amd64", "halite-agent")}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "is for EM_X86_64") {
		t.Errorf("amd64 binary as armv7: %v", err)
	}
	_, err = Build(Spec{Format: "ipk", Kind: "agent", Arch: armv7, Version: "1.0", BinDir: t.TempDir()}, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "halite-agent: ") || !strings.Contains(err.Error(), "dist/linux-armv7") {
		t.Errorf("no binary: %v", err)
	}
}

// TestDebNonRoot installs a package into a directory as a user without
// root: dpkg --root DIR --force-not-root --force-script-chrootless needs no
// privilege (the files are owned by that user; the maintainer scripts run
// with DPKG_ROOT=DIR). Run as root, the test drops to nobody with setpriv;
// run as another user, TestDebAgent is already this test.
func TestDebNonRoot(t *testing.T) {
	need(t, "dpkg", "setpriv")
	if os.Getuid() != 0 {
		t.Skip("not root: TestDebAgent installs without root")
	}
	amd64, _ := firmware.LookupArch("amd64")
	bins := binDir(t, "amd64", "halite-agent")
	// A directory nobody can reach (t.TempDir's parents are 0700).
	top, err := os.MkdirTemp("", "halite-pkg-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	r, err := Build(Spec{Format: "deb", Kind: "agent", Arch: amd64, Version: "1.0", BinDir: bins}, top)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(top, "root")
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		os.WriteFile(filepath.Join(root, f), nil, 0o644)
	}
	filepath.Walk(top, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			os.Lchown(p, 65534, 65534)
		}
		return nil
	})
	os.Chmod(top, 0o755)
	os.Chmod(r.Path, 0o644)
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "dpkg", "--root="+root,
		"--force-not-root", "--force-script-chrootless", "--log=/dev/null", "--install", r.Path)
	cmd.Env = append(os.Environ(), "HOME="+top)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg as nobody: %v\n%s", err, out)
	}
	fi, err := os.Stat(filepath.Join(root, "usr/bin/halite-agent"))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("halite-agent: %v %v", fi, err)
	}
	if _, err := os.Readlink(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/halite-agent.service")); err != nil {
		t.Errorf("postinst (as nobody) did not enable the unit: %v", err)
	}
}

// checkLogrotate has logrotate read a packaged snippet (-d: nothing is
// rotated) and fail on any error in it.
func checkLogrotate(t *testing.T, file string) {
	t.Helper()
	need(t, "logrotate")
	out, err := exec.Command("logrotate", "-d", "-s", filepath.Join(t.TempDir(), "state"), file).CombinedOutput()
	if err != nil || bytes.Contains(bytes.ToLower(out), []byte("error")) {
		t.Errorf("logrotate -d %s: %v\n%s", file, err, out)
	}
	if !bytes.Contains(out, []byte("rotating pattern: /var/log/halite/")) {
		t.Errorf("logrotate -d %s read no pattern:\n%s", file, out)
	}
}
