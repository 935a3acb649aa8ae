package reactor

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Rule is one entry of the `reactor:` option: a tag glob and the SLS files
// to render for the events it matches, in order. A file is a local path
// (shell globs allowed) or a salt:// URL on the file server (base
// environment unless ?saltenv= says otherwise).
type Rule struct {
	Tag   string   `json:"tag"`
	Files []string `json:"files"`
}

// ParseConfig reads the `reactor:` option: a list of one-key mappings of a
// tag glob to a list of files (a single file as a string is accepted).
func ParseConfig(v []any) ([]Rule, error) {
	var out []Rule
	for i, item := range v {
		m, ok := item.(map[string]any)
		if !ok || len(m) == 0 {
			return nil, fmt.Errorf("reactor entry %d: expected a mapping of a tag to a list of files, got %T", i+1, item)
		}
		tags := make([]string, 0, len(m))
		for t := range m {
			tags = append(tags, t)
		}
		sort.Strings(tags)
		for _, tag := range tags {
			files, err := fileList(m[tag])
			if err != nil {
				return nil, fmt.Errorf("reactor entry %d (%s): %w", i+1, tag, err)
			}
			out = append(out, Rule{Tag: tag, Files: files})
		}
	}
	return out, nil
}

func fileList(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, f := range v {
			s, ok := f.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("expected file paths, got %v", f)
			}
			out = append(out, s)
		}
		return out, nil
	case []string:
		return v, nil
	}
	return nil, fmt.Errorf("expected a list of files, got %T", v)
}

// Files finds reactor files: local paths and globs on disk, salt:// URLs
// under the file roots.
type Files struct {
	// Roots are file_roots: environment name to directories, searched in
	// order.
	Roots map[string][]string
}

// Expand returns the files a rule's path names now: a local glob's matches
// in lexical order (none is not an error), a local path as is, a salt:// URL
// as the first file-root file that exists.
func (f Files) Expand(path string) ([]string, error) {
	if strings.HasPrefix(path, "salt://") {
		p, err := f.resolveSalt(path)
		if err != nil {
			return nil, err
		}
		return []string{p}, nil
	}
	if !strings.ContainsAny(path, "*?[") {
		return []string{path}, nil
	}
	m, err := filepath.Glob(path)
	if err != nil {
		return nil, fmt.Errorf("reactor file glob %s: %w", path, err)
	}
	return m, nil
}

func (f Files) resolveSalt(raw string) (string, error) {
	rest := strings.TrimPrefix(raw, "salt://")
	env := "base"
	if p, q, ok := strings.Cut(rest, "?"); ok {
		rest = p
		vals, err := url.ParseQuery(q)
		if err != nil {
			return "", fmt.Errorf("reactor file %s: %w", raw, err)
		}
		if e := vals.Get("saltenv"); e != "" {
			env = e
		}
	}
	clean := filepath.Clean("/" + rest)[1:]
	if clean == "" || clean == "." {
		return "", fmt.Errorf("reactor file %s: no path", raw)
	}
	roots, ok := f.Roots[env]
	if !ok {
		return "", fmt.Errorf("reactor file %s: no file_roots for saltenv %q", raw, env)
	}
	for _, r := range roots {
		p := filepath.Join(r, clean)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("reactor file %s: not found under file_roots %s: %v", raw, env, roots)
}
