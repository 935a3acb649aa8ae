package exec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// cp.* after salt/modules/cp.py and salt/fileclient.py: salt:// files from
// the master's file server (Options.Files: the running agent asks its
// master, through its relay, and fetches files by verified chunks), or,
// on a masterless agent and halite-call --local, from the agent's own
// file_roots (LocalFiles). gzip= is accepted and ignored (chunks travel
// once per site through the relay's cache); template= on cp.get_file and
// cp.get_dir (rendering the paths) is refused; cp.get_template renders the
// file on the master, with this device's grains and pillar (no Jinja on
// the default device build), or locally in the -tags reactor build.

// RemoteFile is a file on the file server as a FileClient found it.
type RemoteFile struct {
	Path   string // relative to its root, '/'-separated
	Env    string // the saltenv it was found in
	SHA256 []byte
	Size   int64
	Ref    any // the client's own handle (a manifest), for Get
}

// FileClient is the salt:// file server as cp.* sees it (Salt's
// fileclient). A missing file or directory is an error that wraps
// ErrFileMissing.
type FileClient interface {
	Find(ctx context.Context, url, saltenv string) (RemoteFile, error)
	Hash(ctx context.Context, url, saltenv string) (RemoteFile, error)
	List(ctx context.Context, saltenv, prefix string) ([]string, error)
	Dirs(ctx context.Context, saltenv, prefix string) ([]string, error)
	// Dir: every file under the directory url names, and its empty
	// directories.
	Dir(ctx context.Context, url, saltenv string) (files []RemoteFile, empty []string, err error)
	// Template renders the file url names (Jinja) with this device's
	// grains and pillar and vars over them.
	Template(ctx context.Context, url, saltenv string, vars map[string]any) ([]byte, error)
	// Get writes f to dst (whose folder exists) atomically, verified
	// against f.SHA256.
	Get(ctx context.Context, f RemoteFile, dst string) error
}

// Errors a FileClient wraps: the file server holds no such file or
// directory; a template did not render (Salt logs it and returns "").
var (
	ErrFileMissing    = errors.New("not found on the file server")
	ErrTemplateFailed = errors.New("template did not render")
)

const saltScheme = "salt://"

// modcpModule is the cp functions of modcp.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modcpModule = module{name: "cp", funcs: []function{
	{
		name: "get_file", varkw: true,
		params: []param{{name: "path", required: true}, {name: "dest", required: true}, {name: "saltenv"}, {name: "makedirs", def: false},
			{name: "template"}, {name: "gzip"}},
		doc: `Copy a file from the master's file server to dest on this device (a
directory, or a path ending in "/", takes the file's name). Returns dest,
"" when the file is not on the file server, False when dest's folder does
not exist and makedirs is not set. The file travels as chunks named by
SHA-256, through the relay's cache, verified before it is put in place.

CLI Example:

    halite '*' cp.get_file salt://path/to/file /minion/dest
    halite '*' cp.get_file salt://foo/bar.conf?saltenv=config /etc/foo/bar.conf`,
		run: cpGetFile,
	},
	{
		name: "get_dir", varkw: true,
		params: []param{{name: "path", required: true}, {name: "dest", required: true}, {name: "saltenv"}, {name: "template"}, {name: "gzip"}},
		doc: `Copy a directory from the master's file server, recursively, into dest
(dest/<the directory's name>/...), its empty directories too. Returns the
paths written, sorted.

CLI Example:

    halite '*' cp.get_dir salt://path/to/dir/ /minion/dest`,
		run: cpGetDir,
	},
	{
		name: "get_template", varkw: true,
		params: []param{{name: "path", required: true}, {name: "dest", required: true}, {name: "template", def: "jinja"}, {name: "saltenv"}, {name: "makedirs", def: false}},
		doc: `Render a file of the file server as a Jinja template (with this device's
grains and pillar, and the keyword arguments as more variables) and write
it to dest (or, with dest "", to the cache). Returns dest, or "" when the
file is missing, does not render or dest's folder does not exist.

CLI Example:

    halite '*' cp.get_template salt://path/to/template /minion/dest`,
		run: cpGetTemplate,
	},
	{
		name:   "cache_file",
		params: []param{{name: "path", required: true}, {name: "saltenv"}, {name: "source_hash"}, {name: "verify_ssl", def: true}, {name: "use_etag", def: false}},
		doc: `Cache a file of the file server on this device (cachedir/files/SALTENV/PATH)
and return its path there; False when it is not on the file server.

CLI Example:

    halite '*' cp.cache_file salt://path/to/file`,
		run: func(ctx context.Context, c *call) (any, error) {
			return cpCacheFile(ctx, c, c.named["path"])
		},
	},
	{
		name:   "cache_files",
		params: []param{{name: "paths", required: true}, {name: "saltenv"}},
		doc: `cp.cache_file of each of paths (a list, or a comma-separated string).

CLI Example:

    halite '*' cp.cache_files salt://pathto/file1,salt://pathto/file1`,
		run: func(ctx context.Context, c *call) (any, error) {
			var paths []any
			switch v := c.named["paths"].(type) {
			case string:
				for _, p := range strings.Split(v, ",") {
					paths = append(paths, p)
				}
			case []any:
				paths = v
			default:
				return nil, invalidf("paths must be a list or a comma-separated string")
			}
			out := make([]any, 0, len(paths))
			for _, p := range paths {
				r, err := cpCacheFile(ctx, c, p)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		},
	},
	{
		name: "cache_dir",
		params: []param{{name: "path", required: true}, {name: "saltenv"}, {name: "include_empty", def: false},
			{name: "include_pat"}, {name: "exclude_pat"}},
		doc: `Cache every file under a directory of the file server (include_pat and
exclude_pat: a glob, or a regular expression after "E@"), and with
include_empty its empty directories. Returns the cached paths.

CLI Example:

    halite '*' cp.cache_dir salt://path/to/dir
    halite '*' cp.cache_dir salt://path/to/dir include_pat='E@*.py$'`,
		run: cpCacheDir,
	},
	{
		name:   "cache_master",
		params: []param{{name: "saltenv"}},
		doc: `Cache every file of the saltenv. Returns the cached paths.

CLI Example:

    halite '*' cp.cache_master`,
		run: func(ctx context.Context, c *call) (any, error) {
			c.named["path"] = saltScheme
			c.named["include_empty"], c.named["include_pat"], c.named["exclude_pat"] = false, nil, nil
			return cpCacheDir(ctx, c)
		},
	},
	{
		name:   "is_cached",
		params: []param{{name: "path", required: true}, {name: "saltenv"}},
		doc: `The path in the cache of a salt:// file cached before, or "".

CLI Example:

    halite '*' cp.is_cached salt://path/to/file`,
		run: func(_ context.Context, c *call) (any, error) {
			u, env, err := cpURL(c, c.named["path"])
			if err != nil {
				return nil, err
			}
			rel, _ := splitSaltURL(u)
			p, err := c.e.cachePath("files", env, rel)
			if err != nil {
				return "", nil
			}
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
			return "", nil
		},
	},
	{
		name:   "get_file_str",
		params: []param{{name: "path", required: true}, {name: "saltenv"}},
		doc: `Cache a file of the file server and return its contents; False when it
is not on the file server.

CLI Example:

    halite '*' cp.get_file_str salt://my/file`,
		run: func(ctx context.Context, c *call) (any, error) {
			r, err := cpCacheFile(ctx, c, c.named["path"])
			p, ok := r.(string)
			if err != nil || !ok {
				return r, err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return false, nil
			}
			return string(b), nil
		},
	},
	{
		name:   "hash_file",
		params: []param{{name: "path", required: true}, {name: "saltenv"}},
		doc: `The hash of a file of the file server (salt://...) or of a local file (an
absolute path): {"hash_type": "sha256", "hsum": ...}; "" (salt://) or {}
(local) when there is none.

CLI Example:

    halite '*' cp.hash_file salt://path/to/file`,
		run: cpHashFile,
	},
	{
		name:   "list_master",
		params: []param{{name: "saltenv"}, {name: "prefix", def: ""}},
		doc: `List the files of the saltenv on the file server (those starting with
prefix).

CLI Example:

    halite '*' cp.list_master`,
		run: func(ctx context.Context, c *call) (any, error) {
			fc, env := c.e.fileClient(), c.saltenv()
			l, err := fc.List(ctx, env, str(c.named["prefix"]))
			if err != nil {
				return nil, commandf("%v", err)
			}
			return toAnyStrings(l), nil
		},
	},
	{
		name:   "list_master_dirs",
		params: []param{{name: "saltenv"}, {name: "prefix", def: ""}},
		doc: `List the directories of the saltenv on the file server (those starting
with prefix).

CLI Example:

    halite '*' cp.list_master_dirs`,
		run: func(ctx context.Context, c *call) (any, error) {
			fc, env := c.e.fileClient(), c.saltenv()
			l, err := fc.Dirs(ctx, env, str(c.named["prefix"]))
			if err != nil {
				return nil, commandf("%v", err)
			}
			return toAnyStrings(l), nil
		},
	},
	{
		name:   "list_states",
		params: []param{{name: "saltenv"}},
		doc: `List the SLS names of the saltenv on the file server.

CLI Example:

    halite '*' cp.list_states`,
		run: func(ctx context.Context, c *call) (any, error) {
			l, err := c.e.fileClient().List(ctx, c.saltenv(), "")
			if err != nil {
				return nil, commandf("%v", err)
			}
			// Client.list_states (salt/fileclient.py)
			seen := map[string]bool{}
			out := []any{}
			for _, p := range l {
				if !strings.HasSuffix(p, ".sls") {
					continue
				}
				name := strings.ReplaceAll(strings.TrimSuffix(p, ".sls"), "/", ".")
				name = strings.TrimSuffix(name, ".init")
				if name != "" && !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
			}
			return out, nil
		},
	},
}}

func init() { register(modcpModule) }

// fileClient is Options.Files, else the local file_roots.
func (e *Executor) fileClient() FileClient {
	if e.files != nil {
		return e.files
	}
	return NewLocalFiles(e.opts, e)
}

// saltenv is the call's saltenv=, else the saltenv option, else "base".
func (c *call) saltenv() string {
	if s := str(c.named["saltenv"]); s != "" {
		return s
	}
	if s := str(c.e.opts["saltenv"]); s != "" {
		return s
	}
	return "base"
}

func str(v any) string {
	if v == nil {
		return ""
	}
	s, _ := toString(v)
	return s
}

func toAnyStrings(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// splitSaltURL is salt.utils.url.parse: the path of a salt:// URL and
// its ?saltenv=.
func splitSaltURL(u string) (string, string) {
	res := strings.TrimPrefix(u, saltScheme)
	if p, _, ok := strings.Cut(res, "?env="); ok {
		return p, ""
	}
	if p, env, ok := strings.Cut(res, "?saltenv="); ok {
		return p, env
	}
	return res, ""
}

// cpURL is the salt:// URL v names and the saltenv it is in (the URL's
// ?saltenv= wins).
func cpURL(c *call, v any) (string, string, error) {
	u, ok := v.(string)
	if !ok || u == "" {
		return "", "", invalidf("path must be a salt:// URL, not %v", v)
	}
	if !strings.HasPrefix(u, saltScheme) {
		return "", "", invalidf("Unsupported path: %s (a salt:// URL is wanted)", u)
	}
	env := c.saltenv()
	if _, senv := splitSaltURL(u); senv != "" {
		env = senv
	}
	return u, env, nil
}

// cachePath is cachedir/kind/env/rel, refused when env or rel would leave it.
func (e *Executor) cachePath(kind, env, rel string) (string, error) {
	rel = strings.Trim(rel, "/")
	if !filepath.IsLocal(env) || strings.ContainsAny(env, `/\`) || rel == "" || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return "", commandf("refusing to cache %q of saltenv %q outside the cache", rel, env)
	}
	dir := str(e.opts["cachedir"])
	if dir == "" {
		dir = "/var/cache/halite"
	}
	return filepath.Join(dir, kind, env, filepath.FromSlash(rel)), nil
}

// fetch writes f to dst unless dst holds it already (Salt compares the
// hashes first too); dst's folder must exist.
func fetch(ctx context.Context, fc FileClient, f RemoteFile, dst string) error {
	if sameHash(dst, f.SHA256) {
		return nil
	}
	if err := fc.Get(ctx, f, dst); err != nil {
		return commandf("get %s: %v", f.Path, err)
	}
	return nil
}

func sameHash(p string, sum []byte) bool {
	fh, err := os.Open(p)
	if err != nil {
		return false
	}
	defer fh.Close()
	if st, err := fh.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return false
	}
	return string(h.Sum(nil)) == string(sum)
}

func noPathTemplate(c *call) error {
	if c.named["template"] != nil {
		return invalidf("%s: template= (rendering the path and dest) is not supported; render the file with cp.get_template", c.fun)
	}
	return nil
}

func cpGetFile(ctx context.Context, c *call) (any, error) {
	if err := noPathTemplate(c); err != nil {
		return nil, err
	}
	u, env, err := cpURL(c, c.named["path"])
	if err != nil {
		return nil, err
	}
	dest, ok := c.named["dest"].(string)
	if !ok || dest == "" {
		return nil, invalidf("dest must be a path")
	}
	fc := c.e.fileClient()
	f, err := fc.Find(ctx, u, env)
	if errors.Is(err, ErrFileMissing) {
		return "", nil
	}
	if err != nil {
		return nil, commandf("%v", err)
	}
	if st, err := os.Stat(dest); (err == nil && st.IsDir()) || strings.HasSuffix(dest, "/") {
		dest = filepath.Join(dest, path.Base(f.Path))
	}
	if dir := filepath.Dir(dest); !isDir(dir) {
		if !isTrue(c.named["makedirs"]) {
			return false, nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, commandf("%v", err)
		}
	}
	if err := fetch(ctx, fc, f, dest); err != nil {
		return nil, err
	}
	return dest, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// cpGetDir is Client.get_dir (salt/fileclient.py): files under the
// directory go to dest/<the path after the directory's parent>.
func cpGetDir(ctx context.Context, c *call) (any, error) {
	if err := noPathTemplate(c); err != nil {
		return nil, err
	}
	u, env, err := cpURL(c, c.named["path"])
	if err != nil {
		return nil, err
	}
	dest, ok := c.named["dest"].(string)
	if !ok {
		return nil, invalidf("dest must be a path")
	}
	rel, _ := splitSaltURL(u)
	rel = strings.TrimRight(rel, "/")
	prefix := ""
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		prefix = rel[:i]
	}
	fc := c.e.fileClient()
	files, empty, err := fc.Dir(ctx, u, env)
	if errors.Is(err, ErrFileMissing) {
		return []any{}, nil
	}
	if err != nil {
		return nil, commandf("%v", err)
	}
	local := func(p string) (string, error) {
		r := strings.TrimLeft(strings.TrimPrefix(p, prefix), "/")
		if !filepath.IsLocal(filepath.FromSlash(r)) {
			return "", commandf("refusing %q: it would leave %s", p, dest)
		}
		return filepath.Join(dest, filepath.FromSlash(r)), nil
	}
	var out []string
	for _, f := range files {
		p, err := local(f.Path)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, commandf("%v", err)
		}
		if err := fetch(ctx, fc, f, p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	for _, d := range empty {
		p, err := local(d)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, commandf("%v", err)
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return toAnyStrings(out), nil
}

func cpCacheFile(ctx context.Context, c *call, v any) (any, error) {
	u, ok := v.(string)
	if ok && strings.HasPrefix(u, "/") {
		// A local file is its own cache (Client.get_url without a scheme).
		if st, err := os.Stat(u); err == nil && st.Mode().IsRegular() {
			return u, nil
		}
		return false, nil
	}
	u, env, err := cpURL(c, v)
	if err != nil {
		return nil, err
	}
	fc := c.e.fileClient()
	f, err := fc.Find(ctx, u, env)
	if errors.Is(err, ErrFileMissing) {
		c.e.log.Error("Unable to cache file '" + u + "' from saltenv '" + env + "'.")
		return false, nil
	}
	if err != nil {
		return nil, commandf("%v", err)
	}
	p, err := c.e.cachePath("files", f.Env, f.Path)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, commandf("%v", err)
	}
	if err := fetch(ctx, fc, f, p); err != nil {
		return nil, err
	}
	return p, nil
}

func cpCacheDir(ctx context.Context, c *call) (any, error) {
	u, env, err := cpURL(c, c.named["path"])
	if err != nil {
		return nil, err
	}
	match, err := includeExclude(c.named["include_pat"], c.named["exclude_pat"])
	if err != nil {
		return nil, err
	}
	fc := c.e.fileClient()
	files, empty, err := fc.Dir(ctx, u, env)
	if errors.Is(err, ErrFileMissing) {
		return []any{}, nil
	}
	if err != nil {
		return nil, commandf("%v", err)
	}
	out := []any{}
	for _, f := range files {
		if !match(f.Path) {
			continue
		}
		p, err := c.e.cachePath("files", f.Env, f.Path)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, commandf("%v", err)
		}
		if err := fetch(ctx, fc, f, p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if isTrue(c.named["include_empty"]) {
		for _, d := range empty {
			p, err := c.e.cachePath("files", env, d)
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(p, 0o700); err != nil {
				return nil, commandf("%v", err)
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// includeExclude is salt.utils.stringutils.check_include_exclude: a glob,
// or a regular expression after "E@" (searched, as re.search).
func includeExclude(inc, exc any) (func(string) bool, error) {
	compile := func(v any) (func(string) bool, error) {
		if v == nil {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, invalidf("include_pat and exclude_pat must be strings")
		}
		if re, ok := strings.CutPrefix(s, "E@"); ok {
			r, err := regexp.Compile(re)
			if err != nil {
				return nil, invalidf("bad pattern %q: %v", s, err)
			}
			return r.MatchString, nil
		}
		return func(p string) bool { ok, _ := path.Match(s, p); return ok }, nil
	}
	in, err := compile(inc)
	if err != nil {
		return nil, err
	}
	ex, err := compile(exc)
	if err != nil {
		return nil, err
	}
	return func(p string) bool {
		if in != nil && !in(p) {
			return false
		}
		return ex == nil || !ex(p)
	}, nil
}

func cpHashFile(ctx context.Context, c *call) (any, error) {
	p, ok := c.named["path"].(string)
	if ok && !strings.HasPrefix(p, saltScheme) {
		// A local file (Client.__hash_and_stat_file).
		fh, err := os.Open(p)
		if err != nil {
			return map[string]any{}, nil
		}
		defer fh.Close()
		h := sha256.New()
		if _, err := io.Copy(h, fh); err != nil {
			return map[string]any{}, nil
		}
		return map[string]any{"hash_type": "sha256", "hsum": hex.EncodeToString(h.Sum(nil))}, nil
	}
	u, env, err := cpURL(c, p)
	if err != nil {
		return nil, err
	}
	f, err := c.e.fileClient().Hash(ctx, u, env)
	if errors.Is(err, ErrFileMissing) {
		return "", nil
	}
	if err != nil {
		return nil, commandf("%v", err)
	}
	return map[string]any{"hash_type": "sha256", "hsum": hex.EncodeToString(f.SHA256)}, nil
}

// cpGetTemplate is Client.get_template (salt/fileclient.py).
func cpGetTemplate(ctx context.Context, c *call) (any, error) {
	u, env, err := cpURL(c, c.named["path"])
	if err != nil {
		return nil, err
	}
	if t := str(c.named["template"]); t != "jinja" {
		c.e.log.Error("Attempted to render template with unavailable engine " + t)
		return "", nil
	}
	dest := str(c.named["dest"])
	makedirs := isTrue(c.named["makedirs"])
	vars := make(map[string]any, len(c.kw))
	for k, v := range c.kw {
		if k != "env" && !strings.HasPrefix(k, "__") {
			vars[k] = v
		}
	}
	out, err := c.e.fileClient().Template(ctx, u, env, vars)
	switch {
	case errors.Is(err, ErrFileMissing):
		return "", nil
	case errors.Is(err, ErrTemplateFailed):
		c.e.log.Error("Failed to render template with error: " + err.Error())
		return "", nil
	case err != nil:
		return nil, commandf("%v", err)
	}
	if dest == "" {
		rel, _ := splitSaltURL(u)
		if dest, err = c.e.cachePath("extrn_files", env, rel); err != nil {
			return nil, err
		}
		makedirs = true
	}
	if dir := filepath.Dir(dest); !isDir(dir) {
		if !makedirs {
			return "", nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, commandf("%v", err)
		}
	}
	if err := writeAtomic(dest, out); err != nil {
		return nil, commandf("%v", err)
	}
	return dest, nil
}

// writeAtomic writes b to p through a file beside it.
func writeAtomic(p string, b []byte) error {
	tmp := p + ".part"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
