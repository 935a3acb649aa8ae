package version

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// Version and Commit are set by the Makefile:
//
//	-ldflags "-X github.com/halite-fleet/halite/internal/version.Version=$(git describe --tags --always --dirty)
//	          -X github.com/halite-fleet/halite/internal/version.Commit=$(git rev-parse HEAD)"
//
// A build without them is "devel", with the commit Go recorded (vcs.revision),
// if any.
var (
	Version = "devel"
	Commit  = ""
)

// revision is the commit: Commit, else the vcs.revision (and vcs.modified)
// of the build info, else "unknown".
func revision(bi *debug.BuildInfo) string {
	if Commit != "" {
		return Commit
	}
	if bi == nil {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

func buildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// Line is what --version prints, Salt's "%prog VERSION" with the commit
// and the Go release: "halite-master 0.2.0 (commit 1a2b3c4, go1.24.2)".
func Line(prog string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", prog, Version, revision(buildInfo()), runtime.Version())
}

// Report writes what --versions-report prints, in the shape of Salt's
// versions_report (salt/version.py): sections "Halite Version:", "Go
// Version:" (Salt's "Python Version:"), "Dependency Versions:" (the Go
// modules linked in, from the build info) and "System Versions:", each a
// list of "name: value" right-aligned on the longest name plus one, names
// sorted case-insensitively, and a line holding one space after each.
func Report(w io.Writer) error {
	bi := buildInfo()
	deps := map[string]string{}
	if bi != nil {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version + " (replaces " + d.Version + ")"
				if d.Replace.Version == "" || d.Replace.Version == "(devel)" {
					// A directory (go.mod's replace of zap by
					// third_party/zap): the version it is a copy of.
					v = d.Version + " (" + d.Replace.Path + ")"
				}
			}
			deps[d.Path] = v
		}
	}
	sections := []struct {
		name  string
		items map[string]string
	}{
		{"Halite Version", map[string]string{"Halite": Version, "commit": revision(bi)}},
		{"Go Version", map[string]string{"Go": runtime.Version()}},
		{"Dependency Versions", deps},
		{"System Versions", system()},
	}
	const notInstalled = "Not Installed"
	pad := len(notInstalled)
	for _, s := range sections[2:] {
		for name := range s.items {
			pad = max(pad, len(name))
		}
	}
	pad++
	var b strings.Builder
	for _, s := range sections {
		fmt.Fprintf(&b, "%s:\n", s.name)
		names := make([]string, 0, len(s.items))
		for name := range s.items {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return strings.ToLower(names[i]) < strings.ToLower(names[j]) })
		for _, name := range names {
			v := s.items[name]
			if v == "" {
				v = notInstalled
			}
			fmt.Fprintf(&b, "%*s: %s\n", pad, name, v)
		}
		b.WriteString(" \n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// system is Salt's "System Versions" (system_information in
// salt/version.py): system, dist, release, machine, version, locale.
func system() map[string]string {
	u := uname()
	dist, pretty := osRelease()
	return map[string]string{
		"system":  strings.ToUpper(runtime.GOOS[:1]) + runtime.GOOS[1:],
		"dist":    dist,
		"release": u.release,
		"machine": u.machine,
		"version": pretty,
		"locale":  "utf-8",
	}
}

type utsname struct{ release, machine string }

func goarch() string { return runtime.GOARCH }
