package pkg

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// describeRE is `git describe`'s "TAG-N-gHASH[-dirty]".
	describeRE = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]{4,40})(-dirty)?$`)
	// hashRE is `git describe --always` without a tag: "HASH[-dirty]".
	hashRE = regexp.MustCompile(`^([0-9a-f]{7,40})(-dirty)?$`)
	// debVersionRE is a Debian version without a revision (deb-version(7)):
	// [epoch:]upstream, the upstream starting with a digit. opkg compares
	// versions as dpkg does.
	debVersionRE = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~]*$`)
)

// Version makes v a version dpkg and opkg accept, that sorts as releases
// do:
//
//	v1.2.3              -> 1.2.3
//	v1.2.0-rc1          -> 1.2.0~rc1            (before 1.2.0)
//	v1.2-3-gabc1234     -> 1.2+3.gabc1234       (after 1.2, before 1.3)
//	v1.2-3-gabc1234-dirty -> 1.2+3.gabc1234.dirty
//	abc1234 (no tag)    -> 0~git.abc1234        (before any release)
//
// Anything else that is not a Debian version is an error saying why.
func Version(v string) (string, error) {
	in := v
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("version: empty")
	}
	suffix := ""
	if m := describeRE.FindStringSubmatch(v); m != nil {
		v, suffix = m[1], "+"+m[2]+".g"+m[3]
		if m[4] != "" {
			suffix += ".dirty"
		}
	} else if m := hashRE.FindStringSubmatch(v); m != nil && strings.ContainsAny(m[1], "abcdef") {
		v = "0~git." + m[1]
		if m[2] != "" {
			v += ".dirty"
		}
	}
	if len(v) > 1 && (v[0] == 'v' || v[0] == 'V') && v[1] >= '0' && v[1] <= '9' {
		v = v[1:]
	}
	// A pre-release (semver's 1.2.0-rc1) sorts before its release: "~".
	// Debian reserves "-" for the packaging revision, which these
	// packages have none of.
	v = strings.ReplaceAll(v, "-", "~") + suffix
	if !debVersionRE.MatchString(v) {
		return "", fmt.Errorf("version %q: not a package version: it must start with a digit (after an optional v) and hold only letters, digits and . + ~ - (give --version 1.2.3, or a git describe)", in)
	}
	return v, nil
}

// fileVersion is v as it appears in a package's file name: without its
// epoch (dpkg-name's convention).
func fileVersion(v string) string {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		return v[i+1:]
	}
	return v
}
