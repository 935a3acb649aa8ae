package statecomp

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// STAND-IN for master/fileserver (helper stfiles writes it in parallel):
// file_roots lookups of SLS names and template names, first root wins.
// At merge, roots' methods call fileserver.New(roots).SLSPath / Open
// instead; the rest of the package only calls these three methods.
type roots map[string][]string

// slsPath is the file of SLS name sls in env: a/b.sls, else a/b/init.sls,
// in the first root that has either; "" if none has.
func (r roots) slsPath(env, sls string) (abs, rel string) {
	if !validSLS(sls) {
		return "", ""
	}
	p := strings.ReplaceAll(sls, ".", "/")
	for _, root := range r[env] {
		for _, rel := range []string{p + ".sls", p + "/init.sls"} {
			abs := filepath.Join(root, filepath.FromSlash(rel))
			if fi, err := os.Stat(abs); err == nil && fi.Mode().IsRegular() {
				return abs, rel
			}
		}
	}
	return "", ""
}

// filePath is the file at rel (a path under the roots, or salt://rel) in
// env, from the first root that has it; "" if none has.
func (r roots) filePath(env, rel string) string {
	rel = strings.TrimPrefix(rel, "salt://")
	if !validRel(rel) {
		return ""
	}
	for _, root := range r[env] {
		abs := filepath.Join(root, filepath.FromSlash(rel))
		if fi, err := os.Stat(abs); err == nil && fi.Mode().IsRegular() {
			return abs
		}
	}
	return ""
}

// relOf is abs relative to the root of env that holds it.
func (r roots) relOf(env, abs string) (string, error) {
	for _, root := range r[env] {
		if rel, err := filepath.Rel(root, abs); err == nil && validRel(filepath.ToSlash(rel)) {
			return filepath.ToSlash(rel), nil
		}
	}
	return "", fmt.Errorf("%s is not under the file roots of saltenv %q", abs, env)
}

func validSLS(sls string) bool {
	return sls != "" && !strings.ContainsAny(sls, "/\\\x00") && !strings.Contains(sls, "..") &&
		!strings.HasPrefix(sls, ".") && !strings.HasSuffix(sls, ".")
}

func validRel(rel string) bool {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.ContainsAny(rel, "\\\x00") {
		return false
	}
	for _, part := range strings.Split(rel, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}
