package exec

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// The local file client (Salt's file_client: local, FSClient): cp.* on a
// masterless agent and halite-call --local read the agent's own file_roots
// (default /srv/halite), the first root holding a path winning, through an
// os.Root of each root so that no path or symlink leads out of it.

// localTemplate renders a Jinja template locally; nil in the default build
// (-tags reactor sets it: modcp_jinja.go).
var localTemplate func(name string, src []byte, vars map[string]any) (string, error)

const (
	maxLocalWalk     = 200_000 // entries one listing looks at
	maxLocalTemplate = 4 << 20 // bytes of a template source
)

type localFiles struct {
	roots map[string][]string
	e     *Executor
}

// NewLocalFiles is a FileClient over opts' file_roots ({env: [dir, ...]},
// default {base: [/srv/halite]}); e gives templates their grains and
// pillar (nil: none).
func NewLocalFiles(opts map[string]any, e *Executor) FileClient {
	roots := map[string][]string{}
	if m, ok := opts["file_roots"].(map[string]any); ok {
		for env, v := range m {
			l, _ := v.([]any)
			for _, d := range l {
				if s, ok := d.(string); ok {
					roots[env] = append(roots[env], s)
				}
			}
		}
	}
	if m, ok := opts["file_roots"].(map[string][]string); ok {
		for env, v := range m {
			roots[env] = append(roots[env], v...)
		}
	}
	if len(roots) == 0 {
		roots["base"] = []string{"/srv/halite"}
	}
	return &localFiles{roots: roots, e: e}
}

type localRef struct{ root, rel string }

// cleanLocal is rel as a clean relative path, or an error saying why not.
func cleanLocal(rel string) (string, error) {
	switch {
	case rel == "":
		return "", errors.New("empty path")
	case len(rel) > 4096:
		return "", errors.New("path longer than 4096 bytes")
	case strings.IndexByte(rel, 0) >= 0:
		return "", errors.New("NUL byte in path")
	case strings.HasPrefix(rel, "/"):
		return "", errors.New("absolute path")
	}
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			return "", errors.New("'..' in path")
		}
	}
	return path.Clean(rel), nil
}

func (l *localFiles) resolve(u, env string) (string, string, error) {
	rel, senv := splitSaltURL(u)
	if senv != "" {
		env = senv
	}
	clean, err := cleanLocal(rel)
	if err != nil {
		return "", env, fmt.Errorf("%s refused in saltenv '%s': %w", u, env, err)
	}
	return clean, env, nil
}

func (l *localFiles) Find(ctx context.Context, u, env string) (RemoteFile, error) {
	rel, env, err := l.resolve(u, env)
	if err != nil {
		return RemoteFile{}, err
	}
	for _, dir := range l.roots[env] {
		r, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		fh, err := r.Open(rel)
		r.Close()
		if err != nil {
			continue
		}
		st, err := fh.Stat()
		if err != nil || !st.Mode().IsRegular() {
			fh.Close()
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return RemoteFile{}, fmt.Errorf("read %s: %w", u, err)
		}
		return RemoteFile{Path: rel, Env: env, SHA256: h.Sum(nil), Size: n, Ref: localRef{dir, rel}}, nil
	}
	return RemoteFile{}, fmt.Errorf("%s in saltenv '%s': %w", u, env, ErrFileMissing)
}

func (l *localFiles) Hash(ctx context.Context, u, env string) (RemoteFile, error) {
	return l.Find(ctx, u, env)
}

// walk is every file and directory under start in env's roots.
func (l *localFiles) walk(env, start string) (files, dirs []string, err error) {
	fset, dset := map[string]bool{}, map[string]bool{}
	n := 0
	for _, dir := range l.roots[env] {
		r, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		err = fs.WalkDir(r.FS(), start, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if n++; n > maxLocalWalk {
				return fmt.Errorf("more than %d entries under %s", maxLocalWalk, dir)
			}
			switch {
			case p == ".":
			case d.IsDir():
				dset[p] = true
			case d.Type().IsRegular():
				fset[p] = true
			}
			return nil
		})
		r.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return sortedSet(fset), sortedSet(dset), nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (l *localFiles) List(ctx context.Context, env, prefix string) ([]string, error) {
	files, _, err := l.walk(env, ".")
	return withPrefix(files, prefix), err
}

func (l *localFiles) Dirs(ctx context.Context, env, prefix string) ([]string, error) {
	_, dirs, err := l.walk(env, ".")
	return withPrefix(dirs, prefix), err
}

func withPrefix(l []string, prefix string) []string {
	prefix = strings.Trim(prefix, "/")
	out := []string{}
	for _, s := range l {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func (l *localFiles) Dir(ctx context.Context, u, env string) ([]RemoteFile, []string, error) {
	rel, senv := splitSaltURL(u)
	if senv != "" {
		env = senv
	}
	start := "."
	if r := strings.Trim(rel, "/"); r != "" {
		var err error
		if start, err = cleanLocal(r); err != nil {
			return nil, nil, fmt.Errorf("%s refused in saltenv '%s': %w", u, env, err)
		}
	}
	files, dirs, err := l.walk(env, start)
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 && len(dirs) == 0 {
		return nil, nil, fmt.Errorf("the directory %s in saltenv '%s': %w", u, env, ErrFileMissing)
	}
	var out []RemoteFile
	for _, f := range files {
		rf, err := l.Find(ctx, saltScheme+f, env)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, rf)
	}
	full := map[string]bool{}
	for _, p := range append(append([]string(nil), files...), dirs...) {
		for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p[:i], '/') {
			full[p[:i]] = true
		}
	}
	var empty []string
	for _, d := range dirs {
		if !full[d] {
			empty = append(empty, d)
		}
	}
	return out, empty, nil
}

func (l *localFiles) Template(ctx context.Context, u, env string, vars map[string]any) ([]byte, error) {
	if localTemplate == nil {
		return nil, errors.New("cp.get_template on an agent without a master needs Jinja: the -tags reactor build of halite-agent (the default build renders templates on the master)")
	}
	f, err := l.Find(ctx, u, env)
	if err != nil {
		return nil, err
	}
	ref := f.Ref.(localRef)
	r, err := os.OpenRoot(ref.root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if f.Size > maxLocalTemplate {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d a template may be", u, f.Size, maxLocalTemplate)
	}
	src, err := r.ReadFile(ref.rel)
	if err != nil {
		return nil, err
	}
	v := map[string]any{"grains": map[string]any{}, "pillar": map[string]any{}, "saltenv": f.Env}
	if l.e != nil {
		v["grains"], v["pillar"] = l.e.grains.Get(), l.e.pillarData()
	}
	for k, x := range vars {
		v[k] = x
	}
	text, err := localTemplate(u, src, v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplateFailed, err)
	}
	if strings.HasSuffix(string(src), "\n") && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return []byte(text), nil
}

func (l *localFiles) Get(ctx context.Context, f RemoteFile, dst string) error {
	ref, ok := f.Ref.(localRef)
	if !ok {
		return fmt.Errorf("%s was not found by this client", f.Path)
	}
	r, err := os.OpenRoot(ref.root)
	if err != nil {
		return err
	}
	defer r.Close()
	src, err := r.Open(ref.rel)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := dst + ".part"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), src)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && string(h.Sum(nil)) != string(f.SHA256) {
		err = fmt.Errorf("%s changed while it was copied", f.Path)
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
