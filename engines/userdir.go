package engines

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/atomicfile"
)

// User engines are files under _engines/ in the master's file_roots (the
// master runs them from there) and, once synced by saltutil.sync_engines,
// under cachedir/extmods/engines on an agent. A file NAME.star is a
// Starlark engine (module NAME); any other executable file is a JSON-lines
// engine (module: its name without extension).

// ManifestName is the file in a synced directory that records each
// module's SHA-256, checked before a synced engine is started.
const ManifestName = ".manifest.json"

// MaxSync bounds the total size of the user engines one sync carries.
const MaxSync = 2 << 20

// File is one user engine file as synced.
type File struct {
	Name   string // base name, e.g. counter.star
	Data   []byte
	SHA256 string // hex
	Mode   os.FileMode
}

// ScriptCompiler turns a Starlark engine's source into a Factory; nil in a
// build without Starlark.
type ScriptCompiler func(file string, src []byte) (Factory, error)

// UserDir finds user engines in directories (searched in order).
type UserDir struct {
	Dirs     []string
	Script   ScriptCompiler
	Verified bool // check files against Dirs[i]/.manifest.json (synced dirs)
}

// ErrTampered is a synced engine whose file no longer has the hash the
// master sent.
var ErrTampered = errors.New("engine file does not match the hash it was synced with")

// Lookup finds module: DIR/module.star, else an executable DIR/module or
// DIR/module.<ext>.
func (u UserDir) Lookup(module string) (UserModule, error) {
	for _, dir := range u.Dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		var cands []string
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") {
				continue
			}
			if n == module || strings.TrimSuffix(n, filepath.Ext(n)) == module {
				cands = append(cands, n)
			}
		}
		sort.Slice(cands, func(i, j int) bool { // module.star first
			return strings.HasSuffix(cands[i], ".star") && !strings.HasSuffix(cands[j], ".star")
		})
		for _, n := range cands {
			path := filepath.Join(dir, n)
			data, err := os.ReadFile(path)
			if err != nil {
				return UserModule{}, fmt.Errorf("read %s: %w", path, err)
			}
			sum := sha256.Sum256(data)
			version := hex.EncodeToString(sum[:])
			if u.Verified {
				man, err := ReadManifest(dir)
				if err != nil {
					return UserModule{}, err
				}
				if man[n] != version {
					return UserModule{}, fmt.Errorf("%s: %w (run saltutil.sync_engines again)", path, ErrTampered)
				}
			}
			if strings.HasSuffix(n, ".star") {
				if u.Script == nil {
					return UserModule{}, fmt.Errorf("%s is a Starlark engine, and this binary was built without Starlark (go build -tags starlark)", path)
				}
				f, err := compiled(u.Script, path, version, data)
				if err != nil {
					return UserModule{}, err
				}
				return UserModule{Factory: f, Version: version}, nil
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode()&0o111 == 0 {
				continue // not executable: not an engine (a README, data)
			}
			return UserModule{Factory: ExecutableFactory(path), Version: version}, nil
		}
	}
	return UserModule{}, ErrNoModule
}

// compiledCache keeps the last compilation of each script file, so that
// looking modules up again (every refresh) does not compile unchanged
// files again.
var compiledCache = struct {
	sync.Mutex
	m map[string]compiledScript
}{m: map[string]compiledScript{}}

type compiledScript struct {
	version string
	f       Factory
}

func compiled(compile ScriptCompiler, path, version string, src []byte) (Factory, error) {
	compiledCache.Lock()
	c, ok := compiledCache.m[path]
	compiledCache.Unlock()
	if ok && c.version == version {
		return c.f, nil
	}
	f, err := compile(path, src)
	if err != nil {
		return nil, err
	}
	compiledCache.Lock()
	compiledCache.m[path] = compiledScript{version, f}
	compiledCache.Unlock()
	return f, nil
}

// ExecutableFactory is the factory of an executable user engine: it runs
// path as a JSON-lines engine (see the script engine) with all its options
// in HALITE_ENGINE_OPTS (JSON); the option events lists the tag globs
// written to its stdin, interval the wait before re-running it after a
// clean exit.
func ExecutableFactory(path string) Factory {
	return func(o *Opts) (Engine, error) {
		all := o.All()
		p := &Process{Argv: []string{path}, Interval: time.Second, Opts: all}
		sub := NewOpts(all)
		var err error
		if p.Events, err = sub.Strings("events", nil); err != nil {
			return nil, err
		}
		if p.Interval, err = sub.Seconds("interval", time.Second); err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Collect reads the user engines under root/_engines for each root (the
// master's file_roots base), the first root holding a name winning, as
// Salt's fileserver does. A file is read through an os.Root of its
// _engines directory: a symlink leading out of it (to a key, a password
// file the master can read) is refused and logged, and never sent to the
// agents, though Salt's fileserver follows symlinks
// (fileserver_followsymlinks: True); a symlink to another file of the
// directory is followed.
func Collect(roots []string, log *zap.Logger) ([]File, error) {
	if log == nil {
		log = zap.NewNop()
	}
	seen := map[string]bool{}
	var out []File
	total := 0
	for _, root := range roots {
		dir := filepath.Join(root, "_engines")
		files, err := collectDir(dir, seen, log)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if total += len(f.Data); total > MaxSync {
				return nil, fmt.Errorf("user engines under %s are more than %d bytes", dir, MaxSync)
			}
		}
		out = append(out, files...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// collectDir reads the engine files of dir whose names are not in seen,
// and adds their names to it.
func collectDir(dir string, seen map[string]bool, log *zap.Logger) ([]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	defer r.Close()
	var out []File
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || seen[n] {
			continue
		}
		path := filepath.Join(dir, n)
		// Through r: a symlink may lead to a file of dir, no further.
		fi, err := r.Stat(n)
		if err != nil && e.Type()&os.ModeSymlink != 0 {
			log.Warn("engine file refused: a symlink that leads out of its _engines directory, or nowhere; not synced to the agents",
				zap.String("file", path), zap.Error(err))
			continue
		}
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := readRegular(r, n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		sum := sha256.Sum256(b)
		seen[n] = true
		out = append(out, File{Name: n, Data: b, SHA256: hex.EncodeToString(sum[:]), Mode: fi.Mode().Perm()})
	}
	return out, nil
}

// readRegular reads the regular file name of r, at most MaxSync+1 bytes.
func readRegular(r *os.Root, name string) ([]byte, error) {
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (replaced while read)")
	}
	return io.ReadAll(io.LimitReader(f, MaxSync+1))
}

// ReadManifest reads dir/.manifest.json (missing: empty).
func ReadManifest(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read engine manifest: %w", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read engine manifest %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return m, nil
}

// SyncError is a Sync that wrote every file but those it names.
type SyncError struct {
	Failed map[string]error // by file name
}

func (e *SyncError) Error() string {
	names := make([]string, 0, len(e.Failed))
	for n := range e.Failed {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("sync engines: not synced: ")
	for i, n := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q: %v", n, e.Failed[n])
	}
	return b.String()
}

// Sync makes dir hold exactly files: each file's hash is checked, changed
// files are written (atomically), files no longer on the master removed,
// and the manifest rewritten. It returns the names written and removed,
// as Salt's saltutil.sync_* lists them ("engines.NAME"). A file that
// cannot be written (a bad name or hash, a name too long for this file
// system) fails alone: the others are synced, a version of it synced
// before is kept, and the error is a *SyncError naming it.
func Sync(dir string, files []File) (changed []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sync engines: %w", err)
	}
	old, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	man := map[string]string{}
	failed := map[string]error{}
	for _, f := range files {
		wrote, err := syncFile(dir, f, old[f.Name])
		if err != nil {
			failed[f.Name] = err
			if sum, ok := old[f.Name]; ok && validName(f.Name) {
				man[f.Name] = sum // the version synced before stays
			}
			continue
		}
		man[f.Name] = f.SHA256
		if wrote {
			changed = append(changed, "engines."+strings.TrimSuffix(f.Name, filepath.Ext(f.Name)))
		}
	}
	for n := range old {
		if _, ok := man[n]; !ok && validName(n) {
			os.Remove(filepath.Join(dir, n))
			changed = append(changed, "engines."+strings.TrimSuffix(n, filepath.Ext(n)))
		}
	}
	b, _ := json.MarshalIndent(man, "", "  ")
	if err := atomicfile.Write(filepath.Join(dir, ManifestName), b, 0o600); err != nil {
		return nil, fmt.Errorf("sync engines: %w", err)
	}
	sort.Strings(changed)
	if len(failed) > 0 {
		return changed, &SyncError{Failed: failed}
	}
	return changed, nil
}

// validName reports whether name may be a synced file's: a base name, not
// hidden (the manifest and temporary files are).
func validName(name string) bool {
	return name != "" && name == filepath.Base(name) && !strings.HasPrefix(name, ".")
}

// syncFile writes f into dir unless the file there already has its hash
// (oldSum, the manifest's, and the content); wrote tells which.
func syncFile(dir string, f File, oldSum string) (wrote bool, err error) {
	if !validName(f.Name) {
		return false, fmt.Errorf("bad file name")
	}
	sum := sha256.Sum256(f.Data)
	if hex.EncodeToString(sum[:]) != f.SHA256 {
		return false, fmt.Errorf("content does not match its SHA-256 %s", f.SHA256)
	}
	path := filepath.Join(dir, f.Name)
	if oldSum == f.SHA256 {
		if cur, err := os.ReadFile(path); err == nil && sha256.Sum256(cur) == sum {
			return false, nil
		}
	}
	mode := f.Mode & 0o755
	if mode == 0 {
		mode = 0o644
	}
	return true, atomicfile.Write(path, f.Data, mode)
}

// FilesToWire encodes files for a job's kwargs (the master attaches them
// to saltutil.sync_engines and sync_all jobs, which it signs).
func FilesToWire(files []File) []any {
	out := make([]any, 0, len(files))
	for _, f := range files {
		out = append(out, map[string]any{"name": f.Name, "sha256": f.SHA256, "mode": int(f.Mode), "data": string(f.Data)})
	}
	return out
}

// FilesFromWire decodes what FilesToWire made.
func FilesFromWire(v any) ([]File, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("engine files: expected a list, got %T", v)
	}
	out := make([]File, 0, len(l))
	for _, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("engine files: expected a mapping, got %T", it)
		}
		name, _ := m["name"].(string)
		sum, _ := m["sha256"].(string)
		data, _ := m["data"].(string)
		var mode os.FileMode
		switch x := m["mode"].(type) {
		case int:
			mode = os.FileMode(x)
		case int64:
			mode = os.FileMode(x)
		case uint64:
			mode = os.FileMode(x)
		}
		out = append(out, File{Name: name, SHA256: sum, Data: []byte(data), Mode: mode})
	}
	return out, nil
}
