package fileserver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// maxPath is the longest relative path served (Linux's PATH_MAX).
	maxPath = 4096
	// maxWalk bounds one listing: entries seen, and directory depth.
	maxWalk      = 200_000
	maxWalkDepth = 64
	// The hash cache: at most cacheEntries files, of which the contents
	// of those no larger than MaxFileBytes are kept up to cacheBytes in
	// all (the files Inline sends with every job).
	cacheEntries = 1 << 16
	cacheBytes   = 64 << 20
)

// LookupTTL is how long the Server trusts what it found on disk (a file's
// place and stamp, its absence, a directory listing) before it looks
// again: a file changed on the master is served within this time. Salt
// trusts its file lists for fileserver_list_cache_time (20 s) and stats a
// file for each hash.
const LookupTTL = time.Second

// Server serves salt:// files from file_roots. Its methods may be called
// concurrently.
type Server struct {
	roots map[string][]string

	// ttl is how long a lookup (a path's file and stamp, or its absence;
	// a directory's listing) is trusted without looking at the disk
	// again: a compile for ten thousand devices does not stat each file
	// ten thousand times. now is the clock (tests set it).
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	cache map[string]*entry  // by path on disk
	bytes int64              // kept contents in cache
	memos map[string]memo    // by saltenv NUL clean path
	lists map[string]listing // by saltenv NUL clean directory
}

// New is a Server over file_roots: saltenv -> directories, searched in
// order (config.Master.FileRoots). A root that does not exist holds
// nothing; it is not an error, so roots may appear later.
func New(roots map[string][]string) *Server {
	r := make(map[string][]string, len(roots))
	for env, dirs := range roots {
		r[env] = append([]string(nil), dirs...)
	}
	return &Server{roots: r, ttl: LookupTTL, now: time.Now,
		cache: map[string]*entry{}, memos: map[string]memo{}, lists: map[string]listing{}}
}

// NewTTL is New with lookups trusted for ttl instead of LookupTTL; 0:
// the disk is looked at each time (tests that change files).
func NewTTL(roots map[string][]string, ttl time.Duration) *Server {
	s := New(roots)
	s.ttl = ttl
	return s
}

// Envs are the configured environments, sorted (roots.envs). "__env__",
// when configured, is listed as such.
func (s *Server) Envs() []string {
	out := make([]string, 0, len(s.roots))
	for env := range s.roots {
		out = append(out, env)
	}
	sort.Strings(out)
	return out
}

// File is a file on the file server.
type File struct {
	URL     string    // as asked
	Env     string    // the saltenv it was looked up in
	Rel     string    // its path under its root, '/'-separated
	Path    string    // its path on the master's disk: the root joined with Rel
	Size    int64     // bytes, as hashed
	ModTime time.Time // as hashed
	SHA256  string    // lowercase hex
}

// Open finds a salt:// URL's file in saltenv env (the URL's "?saltenv="
// wins) and gives its size and SHA-256. The hash is cached by the file's
// path, size, mtime and inode: an unchanged file is not read again.
func (s *Server) Open(u, env string) (File, error) {
	f, _, err := s.open(u, env, -1)
	return f, err
}

// Read is Open, and the file's bytes. A file larger than max bytes is an
// ErrTooLarge error (with its File filled in); max < 0 is no limit. The
// bytes are shared with other callers and must not be modified.
func (s *Server) Read(u, env string, max int64) (File, []byte, error) {
	if max < 0 {
		max = 1<<63 - 1
	}
	return s.open(u, env, max)
}

func (s *Server) open(u, env string, max int64) (File, []byte, error) {
	rel, senv, ok := resolveURL(u, defaultEnv(env))
	if !ok {
		return File{}, nil, refused(u, defaultEnv(env), "not a salt:// URL")
	}
	return s.read(u, rel, senv, max)
}

// read is the file rel of senv, named u in errors. max < 0: hash only.
func (s *Server) read(u, rel, senv string, max int64) (File, []byte, error) {
	clean, why := cleanRel(rel)
	if why != "" {
		return File{}, nil, refused(u, senv, why)
	}
	key := senv + "\x00" + clean
	if m, ok := s.recall(key); ok && (m.kind != nil || max < 0 || m.e.data != nil || m.e.size > max) {
		return m.answer(u, senv, clean, max, nil)
	}
	fh, dir, err := s.find(u, clean, senv)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) && fe.Kind != nil {
			s.remember(key, memo{kind: fe.Kind, cause: fe.Err})
		}
		return File{}, nil, err
	}
	defer fh.Close()
	p := filepath.Join(dir, filepath.FromSlash(clean))
	e, err := s.hash(p, fh)
	if err != nil {
		return File{}, nil, &Error{Msg: fmt.Sprintf("read %s (%s)", u, p), Err: err}
	}
	m := memo{path: p, e: e}
	if e.st != (stamp{}) {
		s.remember(key, m)
	}
	return m.answer(u, senv, clean, max, fh)
}

// answer is File (and the bytes, up to max) from what m knows; fh, when
// not nil, is the open file to read again if its bytes were not kept.
func (m memo) answer(u, senv, clean string, max int64, fh *os.File) (File, []byte, error) {
	switch m.kind {
	case ErrNotFound:
		return File{}, nil, notFound(u, senv)
	case ErrRefused:
		return File{}, nil, &Error{Kind: ErrRefused, Msg: fmt.Sprintf("%s refused in saltenv '%s'", u, senv), Err: m.cause}
	}
	e := m.e
	f := File{URL: u, Env: senv, Rel: clean, Path: m.path, Size: e.size, ModTime: e.mtime, SHA256: e.sum}
	if max < 0 {
		return f, nil, nil
	}
	if f.Size > max {
		return f, nil, &Error{Kind: ErrTooLarge, Msg: fmt.Sprintf("%s is %d bytes, more than %d", u, f.Size, max)}
	}
	data := e.data
	if data == nil {
		// Not kept (too large for the cache, or it is full): read it
		// again, and hash what was read.
		var err error
		if data, err = readAt(fh, max); err != nil {
			return File{}, nil, &Error{Msg: fmt.Sprintf("read %s (%s)", u, m.path), Err: err}
		}
		if int64(len(data)) > max {
			return f, nil, &Error{Kind: ErrTooLarge, Msg: fmt.Sprintf("%s is more than %d bytes", u, max)}
		}
		f.Size, f.SHA256 = int64(len(data)), sumHex(data)
	}
	return f, data, nil
}

// SLSPath is the file of SLS sls in env on the master's disk: "a.b" is
// a/b.sls, else a/b/init.sls, each looked up in every root in turn
// (fileclient.get_state: a/b.sls in a later root wins over a/b/init.sls
// in an earlier one). Not found, the error is Salt's: "No matching sls
// found for 'a.b' in env 'base'".
func (s *Server) SLSPath(env, sls string) (string, error) {
	env = defaultEnv(env)
	name := strings.ReplaceAll(sls, ".", "/")
	var firstErr error
	for _, cand := range []string{name + ".sls", name + "/init.sls"} {
		if _, why := cleanRel(cand); why != "" {
			return "", &Error{Kind: ErrRefused, Msg: slsMissing(sls, env) + " (" + why + ")"}
		}
		f, _, err := s.read(CreateURL(cand, ""), cand, env, -1)
		if err == nil {
			return f.Path, nil
		}
		if !errors.Is(err, ErrNotFound) && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return "", &Error{Kind: ErrNotFound, Msg: slsMissing(sls, env), Err: firstErr}
	}
	return "", &Error{Kind: ErrNotFound, Msg: slsMissing(sls, env)}
}

// slsMissing is Salt's error for an SLS no root holds
// (salt/state.py BaseHighState.render_highstate).
func slsMissing(sls, env string) string {
	return fmt.Sprintf("No matching sls found for '%s' in env '%s'", sls, env)
}

// List is every file of env whose path starts with prefix (a string
// prefix once '/' is trimmed from both ends, as Salt's file_list with a
// prefix: "web" matches "web/a" and "webapp/b"), over all its roots,
// sorted ('/'-separated paths under the roots). Files behind a symlink that
// leads out of its root are not listed (Salt lists them but refuses to
// serve them).
func (s *Server) List(env, prefix string) ([]string, error) {
	env = defaultEnv(env)
	prefix = strings.Trim(prefix, "/")
	start := "."
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		start = prefix[:i]
	}
	if clean, why := cleanRel(start); why != "" || clean != start {
		return nil, nil // Salt finds nothing under such a prefix
	}
	files, _, err := s.walk(env, start)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if strings.HasPrefix(f, prefix) {
			out = append(out, f)
		}
	}
	return out, nil
}

// ListDir is what file.recurse and cp.get_dir see of the directory a
// salt:// URL names (cp.list_master and cp.list_master_dirs with the
// directory as prefix): every file under it, and every directory under it
// (not itself), over all the roots of the URL's saltenv (else env), sorted,
// '/'-separated and relative to the roots. "salt://" is the whole
// environment. No root holding the directory is Salt's file.recurse error.
func (s *Server) ListDir(u, env string) (files, dirs []string, err error) {
	rel, senv, ok := resolveURL(u, defaultEnv(env))
	if !ok {
		return nil, nil, refused(u, defaultEnv(env), "not a salt:// URL")
	}
	return s.listDir(u, rel, senv)
}

func (s *Server) listDir(u, rel, senv string) (files, dirs []string, err error) {
	clean := "."
	if strings.Trim(rel, "/") != "" {
		var why string
		if clean, why = cleanRel(rel); why != "" {
			return nil, nil, refused(u, senv, why)
		}
	}
	files, dirs, err = s.walk(senv, clean)
	if err != nil {
		return nil, nil, err
	}
	if clean != "." && len(files) == 0 && !contains(dirs, clean) {
		return nil, nil, &Error{Kind: ErrNotFound,
			Msg: fmt.Sprintf("The directory '%s' does not exist on the salt fileserver in saltenv '%s'", clean, senv)}
	}
	if clean != "." {
		dirs = remove(dirs, clean)
	}
	return files, dirs, nil
}

func contains(s []string, x string) bool {
	i := sort.SearchStrings(s, x)
	return i < len(s) && s[i] == x
}

func remove(s []string, x string) []string {
	i := sort.SearchStrings(s, x)
	if i < len(s) && s[i] == x {
		return append(s[:i:i], s[i+1:]...)
	}
	return s
}

func defaultEnv(env string) string {
	if env == "" {
		return "base"
	}
	return env
}

// rootsOf are the directories of env: its own, else the "__env__" roots
// with "__env__" in their paths replaced by env (roots.find_file); never
// base's.
func (s *Server) rootsOf(env string) []string {
	if dirs, ok := s.roots[env]; ok {
		return dirs
	}
	dirs, ok := s.roots["__env__"]
	if !ok {
		return nil
	}
	// The saltenv becomes part of a directory name: it may not climb.
	if env == "." || env == ".." || strings.ContainsAny(env, "/\\\x00") {
		return nil
	}
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = strings.ReplaceAll(d, "__env__", env)
	}
	return out
}

// cleanRel is rel as a clean '/'-separated relative path, or why it is
// refused. "." (a root itself) is clean.
func cleanRel(rel string) (string, string) {
	switch {
	case rel == "":
		return "", "empty path"
	case len(rel) > maxPath:
		return "", fmt.Sprintf("path longer than %d bytes", maxPath)
	case strings.IndexByte(rel, 0) >= 0:
		return "", "NUL byte in path"
	case strings.HasPrefix(rel, "/"):
		return "", "absolute path"
	}
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			return "", "'..' in path"
		}
	}
	return path.Clean(rel), ""
}

// find opens rel, a clean path, in the first root of env holding it as a
// regular file, through an os.Root of that root so that no symlink leads
// out of it. u names it in errors.
func (s *Server) find(u, rel, env string) (*os.File, string, error) {
	var escaped, ioErr error
	for _, dir := range s.rootsOf(env) {
		r, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		fh, err := r.Open(rel)
		r.Close() // fh stays open
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			case errors.Is(err, fs.ErrPermission):
				if ioErr == nil {
					ioErr = err
				}
			default: // leads out of the root, a symlink loop
				if escaped == nil {
					escaped = err
				}
			}
			continue
		}
		fi, err := fh.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			fh.Close()
			continue
		}
		return fh, dir, nil
	}
	switch {
	case ioErr != nil:
		return nil, "", &Error{Msg: fmt.Sprintf("open %s in saltenv '%s'", u, env), Err: ioErr}
	case escaped != nil:
		return nil, "", &Error{Kind: ErrRefused, Msg: fmt.Sprintf("%s refused in saltenv '%s'", u, env), Err: escaped}
	}
	return nil, "", notFound(u, env)
}

// walk lists the files and directories under start (clean, relative) in
// every root of env: the union, sorted. A symlink is followed when it
// stays in its root; one that leads out, or nowhere, is left out.
func (s *Server) walk(env, start string) (files, dirs []string, err error) {
	key := env + "\x00" + start
	if l, ok := s.recallList(key); ok {
		return l.files, l.dirs, nil
	}
	fset, dset := map[string]bool{}, map[string]bool{}
	n := 0
	for _, dir := range s.rootsOf(env) {
		r, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		err = walkRoot(r, start, fset, dset, &n)
		r.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("list %s in saltenv '%s': %w", dir, env, err)
		}
	}
	files, dirs = sorted(fset), sorted(dset)
	s.rememberList(key, listing{files: files, dirs: dirs})
	return files, dirs, nil
}

func walkRoot(r *os.Root, start string, files, dirs map[string]bool, n *int) error {
	fi, err := r.Stat(start)
	if err != nil || !fi.IsDir() {
		return nil
	}
	if start != "." {
		dirs[start] = true
	}
	fsys := r.FS()
	var walk func(rel string, ancestors []os.FileInfo) error
	walk = func(rel string, ancestors []os.FileInfo) error {
		if len(ancestors) > maxWalkDepth {
			return nil
		}
		ents, err := fs.ReadDir(fsys, rel)
		if err != nil {
			return nil // unreadable: as Salt's os.walk, skip it
		}
		for _, e := range ents {
			if *n++; *n > maxWalk {
				return fmt.Errorf("more than %d entries", maxWalk)
			}
			child := path.Join(rel, e.Name())
			mode := e.Type()
			var fi os.FileInfo
			if mode&fs.ModeSymlink != 0 || mode.IsDir() {
				if fi, err = r.Stat(child); err != nil {
					continue // leads out of the root, or nowhere
				}
				mode = fi.Mode().Type()
			}
			switch {
			case mode.IsRegular():
				files[child] = true
			case mode.IsDir():
				loop := false
				for _, a := range ancestors {
					if os.SameFile(a, fi) {
						loop = true
						break
					}
				}
				if loop {
					continue
				}
				dirs[child] = true
				if err := walk(child, append(ancestors, fi)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(start, []os.FileInfo{fi})
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
