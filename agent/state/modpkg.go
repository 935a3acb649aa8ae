package state

// The pkg state module, after Salt 3006's salt/states/pkg.py (installed,
// latest, removed, purged) over the package managers a device has, each
// after its Salt execution module: dpkg/apt (salt/modules/aptpkg.py:
// dpkg-query, apt-get, dpkg -i for sources), opkg (salt/modules/opkg.py)
// and apk (salt/modules/apkpkg.py). Changes are Salt's
// {"pkg": {"old": "", "new": "1.0"}} (salt.utils.data.compare_dicts of
// pkg.list_pkgs before and after).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/state"
)

// The package tools, variables for tests.
var (
	pkgDpkgQuery = "dpkg-query"
	pkgDpkg      = "dpkg"
	pkgAptGet    = "apt-get"
	pkgAptCache  = "apt-cache"
	pkgOpkg      = "opkg"
	pkgApk       = "apk"
)

func init() {
	Register("pkg.installed", Mod{Run: pkgInstalled, Doc: `Ensure that the package is installed, and that it is the correct version (if specified).

    name     the package
    version  the version to install (exact)
    pkgs     a list of packages (names, or {name: version})
    sources  a list of {name: source}: a local path or salt:// .deb/.ipk/.apk
    refresh  update the package index first`})
	Register("pkg.latest", Mod{Run: pkgLatest, Doc: "Ensure that the named package is installed and the latest available version (name, pkgs, refresh)."})
	Register("pkg.removed", Mod{Run: pkgRemoved, Doc: "Verify that a package is not installed, calling pkg.remove if necessary (name, pkgs)."})
	Register("pkg.purged", Mod{Run: pkgPurged, Doc: "Verify that a package is not installed, calling pkg.purge if necessary (name, pkgs)."})
}

// pkgManager is one package manager.
type pkgManager interface {
	// list is pkg.list_pkgs: installed name -> version; removed lists
	// packages removed with their configuration kept (dpkg's rc).
	list(ctx context.Context) (installed map[string]string, removed map[string]bool, err error)
	refresh(ctx context.Context) error
	// install installs names (name or name=version as the tool spells it)
	// and package files.
	install(ctx context.Context, pkgs map[string]string, files []string) error
	remove(ctx context.Context, names []string, purge bool) error
	// candidate is pkg.latest_version's answer for an installed or not
	// installed package: "" when none is known.
	candidate(ctx context.Context, name string) (string, error)
}

// pkgDetect chooses the manager by what is on the device.
func pkgDetect() (pkgManager, error) {
	if q := sysLookPath(pkgDpkgQuery); q != "" {
		return pkgApt{query: q, dpkg: sysLookPath(pkgDpkg), aptGet: sysLookPath(pkgAptGet), aptCache: sysLookPath(pkgAptCache)}, nil
	}
	if o := sysLookPath(pkgOpkg); o != "" {
		return pkgOpkgMgr{opkg: o}, nil
	}
	if a := sysLookPath(pkgApk); a != "" {
		return pkgApkMgr{apk: a}, nil
	}
	return nil, fmt.Errorf("no package manager found (dpkg, opkg or apk)")
}

// pkgCheck turns a command's outcome into an error: it could not run, or
// it exited non-zero (its message).
func pkgCheck(o sysOut, err error) error {
	if err != nil {
		return err
	}
	if o.retcode != 0 {
		return fmt.Errorf("%s", o.message())
	}
	return nil
}

// --- dpkg / apt ---

type pkgApt struct{ query, dpkg, aptGet, aptCache string }

var pkgAptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "APT_LISTBUGS_FRONTEND=none", "APT_LISTCHANGES_FRONTEND=none"}

func (m pkgApt) list(ctx context.Context) (map[string]string, map[string]bool, error) {
	o, err := sysRun(ctx, "", nil, m.query, "--showformat=${Status}\t${Package}\t${Version}\n", "-W")
	if err != nil {
		return nil, nil, err
	}
	if o.retcode != 0 && strings.TrimSpace(o.stdout) == "" {
		return nil, nil, fmt.Errorf("dpkg-query failed: %s", o.message())
	}
	inst, removed := map[string]string{}, map[string]bool{}
	for _, line := range strings.Split(o.stdout, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			continue
		}
		switch st := strings.Fields(f[0]); {
		case len(st) == 3 && st[2] == "installed":
			inst[f[1]] = f[2]
		case len(st) == 3 && st[2] == "config-files":
			removed[f[1]] = true
		}
	}
	return inst, removed, nil
}

func (m pkgApt) refresh(ctx context.Context) error {
	if m.aptGet == "" {
		return fmt.Errorf("apt-get is not installed: refresh needs it")
	}
	return pkgCheck(sysRun(ctx, "", pkgAptEnv, m.aptGet, "-q", "update"))
}

func (m pkgApt) install(ctx context.Context, pkgs map[string]string, files []string) error {
	if len(files) > 0 {
		if m.dpkg == "" {
			return fmt.Errorf("dpkg is not installed")
		}
		argv := append([]string{m.dpkg, "-i", "--force-confold"}, files...)
		if err := pkgCheck(sysRun(ctx, "", pkgAptEnv, argv...)); err != nil {
			return err
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	if m.aptGet == "" {
		return fmt.Errorf("apt-get is not installed: only sources can be installed")
	}
	argv := []string{m.aptGet, "-q", "-y", "-o", "DPkg::Options::=--force-confold", "-o", "DPkg::Options::=--force-confdef", "install"}
	for _, n := range pkgSorted(pkgs) {
		if v := pkgs[n]; v != "" {
			n += "=" + v
		}
		argv = append(argv, n)
	}
	return pkgCheck(sysRun(ctx, "", pkgAptEnv, argv...))
}

func (m pkgApt) remove(ctx context.Context, names []string, purge bool) error {
	if m.aptGet != "" {
		verb := "remove"
		if purge {
			verb = "purge"
		}
		return pkgCheck(sysRun(ctx, "", pkgAptEnv, append([]string{m.aptGet, "-q", "-y", verb}, names...)...))
	}
	flag := "-r"
	if purge {
		flag = "-P"
	}
	return pkgCheck(sysRun(ctx, "", pkgAptEnv, append([]string{m.dpkg, flag}, names...)...))
}

func (m pkgApt) candidate(ctx context.Context, name string) (string, error) {
	if m.aptCache == "" {
		return "", fmt.Errorf("apt-cache is not installed")
	}
	o, err := sysRun(ctx, "", nil, m.aptCache, "-q", "policy", name)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(o.stdout, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Candidate:"); ok {
			if v = strings.TrimSpace(v); v != "(none)" {
				return v, nil
			}
		}
	}
	return "", nil
}

// --- opkg ---

type pkgOpkgMgr struct{ opkg string }

func (m pkgOpkgMgr) list(ctx context.Context) (map[string]string, map[string]bool, error) {
	o, err := sysRun(ctx, "", nil, m.opkg, "list-installed")
	if err := pkgCheck(o, err); err != nil {
		return nil, nil, err
	}
	inst := map[string]string{}
	for _, line := range strings.Split(o.stdout, "\n") {
		if f := strings.SplitN(line, " - ", 3); len(f) >= 2 {
			inst[strings.TrimSpace(f[0])] = strings.TrimSpace(f[1])
		}
	}
	return inst, map[string]bool{}, nil
}

func (m pkgOpkgMgr) refresh(ctx context.Context) error {
	return pkgCheck(sysRun(ctx, "", nil, m.opkg, "update"))
}

func (m pkgOpkgMgr) install(ctx context.Context, pkgs map[string]string, files []string) error {
	argv := []string{m.opkg, "install"}
	for _, n := range pkgSorted(pkgs) {
		if v := pkgs[n]; v != "" {
			n += "=" + v // salt/modules/opkg.py install: "{}={}"
		}
		argv = append(argv, n)
	}
	return pkgCheck(sysRun(ctx, "", nil, append(argv, files...)...))
}

func (m pkgOpkgMgr) remove(ctx context.Context, names []string, _ bool) error {
	return pkgCheck(sysRun(ctx, "", nil, append([]string{m.opkg, "remove"}, names...)...))
}

func (m pkgOpkgMgr) candidate(ctx context.Context, name string) (string, error) {
	o, err := sysRun(ctx, "", nil, m.opkg, "list", name)
	if err != nil {
		return "", err
	}
	v := ""
	for _, line := range strings.Split(o.stdout, "\n") {
		if f := strings.SplitN(line, " - ", 3); len(f) >= 2 && strings.TrimSpace(f[0]) == name {
			v = strings.TrimSpace(f[1])
		}
	}
	return v, nil
}

// --- apk ---

type pkgApkMgr struct{ apk string }

// list is apkpkg.list_pkgs over `apk info -v`: name-version-rN.
func (m pkgApkMgr) list(ctx context.Context) (map[string]string, map[string]bool, error) {
	o, err := sysRun(ctx, "", nil, m.apk, "info", "-v")
	if err := pkgCheck(o, err); err != nil {
		return nil, nil, err
	}
	inst := map[string]string{}
	for _, line := range strings.Split(o.stdout, "\n") {
		f := strings.Split(strings.TrimSpace(line), "-")
		if len(f) < 3 {
			continue
		}
		inst[strings.Join(f[:len(f)-2], "-")] = strings.Join(f[len(f)-2:], "-")
	}
	return inst, map[string]bool{}, nil
}

func (m pkgApkMgr) refresh(ctx context.Context) error {
	return pkgCheck(sysRun(ctx, "", nil, m.apk, "update"))
}

func (m pkgApkMgr) install(ctx context.Context, pkgs map[string]string, files []string) error {
	if len(files) > 0 {
		if err := pkgCheck(sysRun(ctx, "", nil, append([]string{m.apk, "add", "--allow-untrusted"}, files...)...)); err != nil {
			return err
		}
	}
	if len(pkgs) == 0 {
		return nil
	}
	argv := []string{m.apk, "add"}
	for _, n := range pkgSorted(pkgs) {
		if v := pkgs[n]; v != "" {
			n += "=" + v
		}
		argv = append(argv, n)
	}
	return pkgCheck(sysRun(ctx, "", nil, argv...))
}

func (m pkgApkMgr) remove(ctx context.Context, names []string, _ bool) error {
	return pkgCheck(sysRun(ctx, "", nil, append([]string{m.apk, "del"}, names...)...))
}

func (m pkgApkMgr) candidate(ctx context.Context, name string) (string, error) {
	o, err := sysRun(ctx, "", nil, m.apk, "policy", name)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(o.stdout, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "    ") {
			return strings.TrimSuffix(strings.TrimSpace(line), ":"), nil
		}
	}
	return "", nil
}

// --- arguments ---

func pkgSorted(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func pkgBadName(n string) string { return sysBadName("package", n, "/\\'\"`$;&|<>(){}*?[]!") }

func pkgBadVersion(n, v string) string {
	if v == "" {
		return ""
	}
	if strings.HasPrefix(v, "-") || strings.ContainsAny(v, " \t\n\r\x00/\\'\"`$;&|<>(){}*?[]!=") {
		return fmt.Sprintf("Invalid version %q for package %s", v, n)
	}
	return ""
}

// pkgParams is Salt's pkg_resource.parse_targets: name (with version) or
// pkgs, each name -> version ("" for any), in the order given.
func pkgParams(c *Call, withVersion bool) (order []string, want map[string]string, bad string) {
	k := sysKw(c.Chunk)
	want = map[string]string{}
	add := func(n, v string) string {
		if b := pkgBadName(n); b != "" {
			return b
		}
		if b := pkgBadVersion(n, v); b != "" {
			return b
		}
		if _, dup := want[n]; !dup {
			order = append(order, n)
		}
		want[n] = v
		return ""
	}
	if pl, ok := k["pkgs"]; ok && pl != nil {
		l, isList := pl.([]any)
		if !isList {
			return nil, nil, "pkgs must be a list"
		}
		for _, e := range l {
			switch x := e.(type) {
			case map[string]any:
				if len(x) != 1 {
					return nil, nil, "each entry of pkgs must be a name or a one-key {name: version}"
				}
				for n, v := range x {
					vs := ""
					if v != nil {
						vs, _ = sysScalar(v)
					}
					if b := add(n, vs); b != "" {
						return nil, nil, b
					}
				}
			default:
				s, ok := sysScalar(e)
				if !ok {
					return nil, nil, "pkgs must be a list of names"
				}
				if b := add(s, ""); b != "" {
					return nil, nil, b
				}
			}
		}
		return order, want, ""
	}
	v := ""
	if withVersion {
		s, _, err := k.str("version")
		if err != nil {
			return nil, nil, err.Error()
		}
		v = s
	}
	if b := add(c.Name, v); b != "" {
		return nil, nil, b
	}
	return order, want, ""
}

// pkgSources reads sources: [{name: path or salt://url}], writing salt://
// files from the chunk into the agent's cache directory.
func pkgSources(c *Call) (order []string, files map[string]string, bad string) {
	l, ok := c.Chunk["sources"].([]any)
	if !ok {
		return nil, nil, "sources must be a list of {name: source}"
	}
	files = map[string]string{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, nil, "each entry of sources must be a one-key {name: source}"
		}
		for n, v := range m {
			if b := pkgBadName(n); b != "" {
				return nil, nil, b
			}
			src, _ := sysScalar(v)
			var path string
			switch {
			case strings.HasPrefix(src, "salt://"):
				data, found, err := cmdSource(c.Chunk, src)
				if err != nil {
					return nil, nil, err.Error()
				}
				if !found {
					return nil, nil, fmt.Sprintf("Source file %s not found in saltenv '%s'", src, cmdEnv(c.Chunk))
				}
				dir := filepath.Join(c.Host.CacheDir(), "pkg")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return nil, nil, err.Error()
				}
				path = filepath.Join(dir, n+filepath.Ext(strings.SplitN(src, "?", 2)[0]))
				if err := sysWriteAtomic(path, data, 0o600); err != nil {
					return nil, nil, err.Error()
				}
			case filepath.IsAbs(src) && !strings.ContainsAny(src, "\n\x00"):
				if _, err := os.Stat(src); err != nil {
					return nil, nil, fmt.Sprintf("Source file %s not found", src)
				}
				path = src
			default:
				return nil, nil, fmt.Sprintf("Unsupported source %q for package %s: use salt:// or an absolute path", src, n)
			}
			order = append(order, n)
			files[n] = path
		}
	}
	return order, files, ""
}

// pkgDiff is compare_dicts of two package lists.
func pkgDiff(old, cur map[string]string) map[string]any {
	out := map[string]any{}
	for n, v := range cur {
		if old[n] != v {
			out[n] = map[string]any{"old": old[n], "new": v}
		}
	}
	for n, v := range old {
		if _, ok := cur[n]; !ok {
			out[n] = map[string]any{"old": v, "new": ""}
		}
	}
	return out
}

func pkgDesired(n, v string) string {
	if v == "" {
		return n
	}
	return n + "=" + v
}

func pkgJoined(order []string, want map[string]string, sources bool) string {
	parts := make([]string, len(order))
	for i, n := range order {
		if sources {
			parts[i] = n
		} else {
			parts[i] = pkgDesired(n, want[n])
		}
	}
	return strings.Join(parts, ", ")
}

// pkgInstalled is Salt's pkg.installed (its _find_install_targets and the
// install and verification that follow).
func pkgInstalled(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	k := sysKw(c.Chunk)
	if k.boolean("hold", false) {
		return sysFail(name, "hold is not supported by halite-agent")
	}
	var order []string
	var want map[string]string
	var files map[string]string
	var bad string
	hasSources := k.has("sources")
	if hasSources {
		order, files, bad = pkgSources(c)
		want = map[string]string{}
		for _, n := range order {
			want[n] = ""
		}
	} else {
		order, want, bad = pkgParams(c, true)
	}
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	if len(order) == 0 {
		return state.Ret{Name: name, Result: state.True, Comment: "No packages to install provided"}
	}
	m, err := pkgDetect()
	if err != nil {
		return sysFail(name, "%v", err)
	}
	cur, _, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	single := !hasSources && !k.has("pkgs")
	if single {
		v, installed := cur[name]
		if installed && want[name] != "" && want[name] == v {
			return state.Ret{Name: name, Result: state.True, Comment: fmt.Sprintf("Version %s of package '%s' is already installed", v, name)}
		}
		if installed && want[name] == "" {
			return state.Ret{Name: name, Result: state.True, Comment: fmt.Sprintf("Package %s is already installed", name)}
		}
	}
	var targets []string
	versionSpec := false
	for _, n := range order {
		v, installed := cur[n]
		if want[n] != "" {
			versionSpec = true
		}
		if !installed || (want[n] != "" && want[n] != v) {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		msg := "All specified packages are already installed"
		if versionSpec && !hasSources {
			msg += " and are at the desired version"
		}
		return state.Ret{Name: name, Result: state.True, Comment: msg}
	}
	if c.Test {
		changes := map[string]any{}
		for _, n := range targets {
			changes[n] = map[string]any{"new": "installed", "old": ""}
		}
		return state.Ret{Name: name, Result: state.None, Changes: changes,
			Comment: "The following packages would be installed/updated: " + strings.Join(targets, ", ")}
	}
	if k.boolean("refresh", false) {
		if err := m.refresh(ctx); err != nil {
			return sysFail(name, "An error was encountered while installing package(s): %v", err)
		}
	}
	toInstall := map[string]string{}
	var paths []string
	for _, n := range targets {
		if hasSources {
			paths = append(paths, files[n])
		} else {
			toInstall[n] = want[n]
		}
	}
	instErr := m.install(ctx, toInstall, paths)
	after, _, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	changes := pkgDiff(cur, after)
	var modified, notModified, failed []string
	for _, n := range order {
		v, ok := after[n]
		good := ok && (want[n] == "" || want[n] == v)
		isTarget := false
		for _, t := range targets {
			isTarget = isTarget || t == n
		}
		switch {
		case !good:
			failed = append(failed, n)
		case isTarget:
			modified = append(modified, n)
		default:
			notModified = append(notModified, n)
		}
	}
	var comment []string
	if len(modified) > 0 {
		summary := pkgJoined(modified, want, hasSources)
		if len(summary) < 20 {
			comment = append(comment, "The following packages were installed/updated: "+summary)
		} else if len(modified) > 1 {
			comment = append(comment, fmt.Sprintf("%d targeted packages were installed/updated.", len(modified)))
		} else {
			comment = append(comment, "1 targeted package was installed/updated.")
		}
	}
	if len(notModified) > 0 {
		comment = append(comment, "The following packages were already installed: "+pkgJoined(notModified, want, hasSources))
	}
	ret := state.Ret{Name: name, Result: state.True, Changes: changes}
	if len(failed) > 0 {
		msg := "The following packages failed to install/update: " + pkgJoined(failed, want, hasSources)
		if instErr != nil {
			msg += "\n" + instErr.Error()
		}
		comment = append([]string{msg}, comment...)
		ret.Result = state.False
	}
	ret.Comment = strings.Join(comment, "\n")
	return ret
}

// pkgLatest is Salt's pkg.latest.
func pkgLatest(ctx context.Context, c *Call) state.Ret {
	name := c.Name
	k := sysKw(c.Chunk)
	order, _, bad := pkgParams(c, false)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	m, err := pkgDetect()
	if err != nil {
		return sysFail(name, "%v", err)
	}
	if k.boolean("refresh", false) && !c.Test {
		if err := m.refresh(ctx); err != nil {
			return sysFail(name, "%v", err)
		}
	}
	cur, _, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	targets := map[string]string{}
	var problems, upToDate []string
	for _, n := range order {
		cand, err := m.candidate(ctx, n)
		if err != nil {
			return sysFail(name, "%v", err)
		}
		v, installed := cur[n]
		switch {
		case cand == "" && installed:
			upToDate = append(upToDate, n)
		case cand == "":
			problems = append(problems, fmt.Sprintf("No information found for '%s'.", n))
		case installed && v == cand:
			upToDate = append(upToDate, n)
		default:
			targets[n] = cand
		}
	}
	if len(problems) > 0 {
		return sysFail(name, "%s", strings.Join(problems, " "))
	}
	if len(targets) == 0 {
		var comment string
		switch {
		case len(order) > 10:
			comment = fmt.Sprintf("All %d packages are up-to-date.", len(order))
		case len(order) > 1:
			s := append([]string(nil), order...)
			sort.Strings(s)
			comment = fmt.Sprintf("All packages are up-to-date (%s).", strings.Join(s, ", "))
		default:
			comment = fmt.Sprintf("Package %s is already up-to-date", order[0])
		}
		return state.Ret{Name: name, Result: state.True, Comment: comment}
	}
	tl := pkgSorted(targets)
	if c.Test {
		comments := []string{"The following packages would be installed/upgraded: " + strings.Join(tl, ", ")}
		if len(upToDate) > 0 && k.has("pkgs") {
			var parts []string
			for _, n := range upToDate {
				parts = append(parts, fmt.Sprintf("%s (%s)", n, cur[n]))
			}
			comments = append(comments, "The following packages are already up-to-date: "+strings.Join(parts, ", "))
		}
		return state.Ret{Name: name, Result: state.None, Comment: strings.Join(comments, "\n")}
	}
	instErr := m.install(ctx, targets, nil)
	after, _, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	changes := pkgDiff(cur, after)
	var failed, done []string
	for _, n := range tl {
		if after[n] == targets[n] {
			done = append(done, n)
		} else {
			failed = append(failed, n)
		}
	}
	ret := state.Ret{Name: name, Result: state.True, Changes: changes}
	if len(failed) > 0 {
		ret.Result = state.False
		if len(order) == 1 {
			ret.Comment = fmt.Sprintf("Package %s failed to update.", order[0])
		} else {
			ret.Comment = "The following packages failed to update: " + strings.Join(failed, ", ")
		}
		if instErr != nil {
			ret.Comment += "\n" + instErr.Error()
		}
		return ret
	}
	msg := "The following packages were successfully installed/upgraded: " + strings.Join(done, ", ")
	if len(upToDate) > 0 {
		msg += "\nThe following packages were already up-to-date: " + strings.Join(upToDate, ", ")
	}
	ret.Comment = msg
	return ret
}

// pkgRemoved is Salt's pkg.removed.
func pkgRemoved(ctx context.Context, c *Call) state.Ret { return pkgUninstall(ctx, c, "remove") }

// pkgPurged is Salt's pkg.purged.
func pkgPurged(ctx context.Context, c *Call) state.Ret { return pkgUninstall(ctx, c, "purge") }

// pkgUninstall is Salt's pkg._uninstall.
func pkgUninstall(ctx context.Context, c *Call, action string) state.Ret {
	name := c.Name
	order, want, bad := pkgParams(c, true)
	if bad != "" {
		return sysFail(name, "%s", bad)
	}
	m, err := pkgDetect()
	if err != nil {
		return sysFail(name, "%v", err)
	}
	cur, removed, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	var targets []string
	for _, n := range order {
		v, ok := cur[n]
		if ok && (want[n] == "" || want[n] == v) || action == "purge" && removed[n] {
			targets = append(targets, n)
		}
	}
	sort.Strings(targets)
	if len(targets) == 0 {
		msg := "None of the targeted packages are installed"
		if action == "purge" {
			msg += " or partially installed"
		}
		return state.Ret{Name: name, Result: state.True, Comment: msg}
	}
	if c.Test {
		changes := map[string]any{}
		for _, n := range targets {
			changes[n] = map[string]any{"new": action + "d", "old": ""}
		}
		return state.Ret{Name: name, Result: state.None, Changes: changes,
			Comment: fmt.Sprintf("The following packages will be %sd: %s.", action, strings.Join(targets, ", "))}
	}
	rmErr := m.remove(ctx, targets, action == "purge")
	after, afterRemoved, err := m.list(ctx)
	if err != nil {
		return sysFail(name, "%v", err)
	}
	changes := pkgDiff(cur, after)
	var failed []string
	for _, n := range order {
		if _, ok := after[n]; ok || action == "purge" && afterRemoved[n] {
			failed = append(failed, n)
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		msg := fmt.Sprintf("The following packages failed to %s: %s.", action, strings.Join(failed, ", "))
		if rmErr != nil {
			msg += "\n" + rmErr.Error()
		}
		return state.Ret{Name: name, Result: state.False, Changes: changes, Comment: msg}
	}
	var notInstalled []string
	for _, n := range order {
		found := false
		for _, t := range targets {
			found = found || t == n
		}
		if !found {
			notInstalled = append(notInstalled, n)
		}
	}
	sort.Strings(notInstalled)
	var comment string
	if len(notInstalled) > 0 {
		comment = fmt.Sprintf("The following packages were not installed: %s The following packages were %sd: %s.",
			strings.Join(notInstalled, ", "), action, strings.Join(targets, ", "))
	} else {
		comment = fmt.Sprintf("All targeted packages were %sd.", action)
	}
	return state.Ret{Name: name, Result: state.True, Changes: changes, Comment: comment}
}
