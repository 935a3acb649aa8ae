package state

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// pkgDeb builds a tiny .deb with dpkg-deb (no network).
func pkgDeb(t *testing.T, name, version string) string {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(root, "usr/share/doc", name), 0o755)
	os.WriteFile(filepath.Join(root, "usr/share/doc", name, "README"), []byte("halite test\n"), 0o644)
	ctl := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: halite <t@example.invalid>\nDescription: halite test dummy\n", name, version)
	os.WriteFile(filepath.Join(root, "DEBIAN/control"), []byte(ctl), 0o644)
	deb := filepath.Join(dir, name+".deb")
	if out, err := exec.Command("dpkg-deb", "--build", "--root-owner-group", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return deb
}

// Cases from Salt's tests/pytests/unit/states/test_pkg.py and
// tests/pytests/functional/states/pkg (installed with sources, removed,
// purged, test=True) and the comments of salt/states/pkg.py.
func TestPkgDpkg(t *testing.T) {
	if os.Getuid() != 0 || sysLookPath("dpkg-deb") == "" || sysLookPath("dpkg-query") == "" {
		t.Skip("needs root and dpkg")
	}
	name := fmt.Sprintf("halite-test-dummy-%d", rand.Uint32())
	t.Cleanup(func() { exec.Command("dpkg", "-P", name).Run() })
	deb := pkgDeb(t, name, "1.0")
	h := newSysHost(t)
	installed := func() string {
		out, _ := exec.Command("dpkg-query", "-W", "-f=${Status} ${Version}", name).Output()
		return string(out)
	}
	src := map[string]any{"sources": []any{map[string]any{name: deb}}}

	r := sysCall(t, h, "pkg.installed", "dummy", true, src)
	sysWant(t, "test", r, state.None, "The following packages would be installed/updated: "+name)
	if installed() != "" {
		t.Fatal("test=True installed the package")
	}
	r = sysCall(t, h, "pkg.installed", "dummy", false, src)
	sysWant(t, "install", r, state.True, "")
	if ch, _ := r.Changes[name].(map[string]any); ch["new"] != "1.0" || ch["old"] != "" {
		t.Fatalf("changes %v, want %s: {old: '', new: 1.0}", r.Changes, name)
	}
	if installed() != "install ok installed 1.0" {
		t.Fatalf("dpkg says %q", installed())
	}
	r = sysCall(t, h, "pkg.installed", "dummy", false, src)
	sysWant(t, "again", r, state.True, "All specified packages are already installed")
	r = sysCall(t, h, "pkg.installed", name, false, nil)
	sysWant(t, "by name", r, state.True, "Package "+name+" is already installed")
	r = sysCall(t, h, "pkg.installed", name, false, map[string]any{"version": "1.0"})
	sysWant(t, "version", r, state.True, "Version 1.0 of package '"+name+"' is already installed")

	// salt:// sources come with the job.
	deb2 := pkgDeb(t, name, "2.0")
	data, _ := os.ReadFile(deb2)
	r = sysCall(t, h, "pkg.installed", "dummy", false, map[string]any{
		"sources": []any{map[string]any{name: "salt://debs/d.deb"}}, "version": "2.0",
		"__files__": map[string]any{"salt://debs/d.deb": map[string]any{"data": data}}})
	sysWant(t, "all installed (sources ignore versions)", r, state.True, "All specified packages are already installed")

	r = sysCall(t, h, "pkg.removed", name, true, nil)
	sysWant(t, "remove test", r, state.None, "The following packages will be removed: "+name+".")
	if !strings.HasPrefix(installed(), "install ok installed") {
		t.Fatal("test=True removed")
	}
	r = sysCall(t, h, "pkg.removed", name, false, nil)
	sysWant(t, "remove", r, state.True, "All targeted packages were removed.")
	if ch, _ := r.Changes[name].(map[string]any); ch["old"] != "1.0" || ch["new"] != "" {
		t.Fatalf("remove changes %v", r.Changes)
	}
	r = sysCall(t, h, "pkg.removed", name, false, nil)
	sysWant(t, "remove again", r, state.True, "None of the targeted packages are installed")
	r = sysCall(t, h, "pkg.purged", name, false, nil)
	if r.Result != state.True {
		t.Fatalf("purge: %v %q", r.Result.Value(), r.Comment)
	}
	if s := installed(); s != "" && !strings.HasPrefix(s, "unknown") && !strings.Contains(s, "not-installed") {
		t.Fatalf("after purge dpkg says %q", s)
	}

	for _, bad := range []string{"-oAPT::x=1", "a b", "a;rm"} {
		r = sysCall(t, h, "pkg.installed", bad, false, nil)
		if r.Result != state.False || !strings.Contains(r.Comment, "Invalid package name") {
			t.Fatalf("hostile %q: %v %q", bad, r.Result.Value(), r.Comment)
		}
	}
	r = sysCall(t, h, "pkg.installed", "x", false, map[string]any{"version": "-1"})
	sysWant(t, "bad version", r, state.False, `Invalid version "-1" for package x`)
	r = sysCall(t, h, "pkg.installed", "x", false, map[string]any{"sources": []any{map[string]any{"x": "http://example.invalid/x.deb"}}})
	sysWant(t, "http source", r, state.False, `Unsupported source "http://example.invalid/x.deb" for package x: use salt:// or an absolute path`)
}
