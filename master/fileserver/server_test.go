package fileserver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// tree writes files (path -> contents; a path ending in '/' is an empty
// directory) under a new directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestFindFile follows tests/pytests/unit/fileserver/test_roots.py
// (test_find_file, test_file_hash, and the unicode state tree of its
// fixtures): a file is found relative to its root, with its sha256.
func TestFindFile(t *testing.T) {
	root := tree(t, map[string]string{
		"testfile":        "This is a testfile",
		"питон.txt":       "this is a unicode file",
		"соль/питон.txt":  "this is a unicode file in a unicode env",
		"соль/notunicode": "this is NOT a unicode file in a unicode env",
	})
	s := New(map[string][]string{"base": {root}})
	f, err := s.Open("salt://testfile", "base")
	if err != nil {
		t.Fatal(err)
	}
	want := File{URL: "salt://testfile", Env: "base", Rel: "testfile", Path: filepath.Join(root, "testfile"),
		Size: 18, ModTime: f.ModTime, SHA256: hexSum("This is a testfile")}
	if d := cmp.Diff(want, f); d != "" {
		t.Errorf("Open(salt://testfile) (-want +got):\n%s", d)
	}
	f, data, err := s.Read("salt://соль/питон.txt", "", -1)
	if err != nil || string(data) != "this is a unicode file in a unicode env" || f.Env != "base" {
		t.Errorf("Read(salt://соль/питон.txt) = %+v, %q, %v", f, data, err)
	}
	// test_file_list
	got, err := s.List("base", "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"testfile", "питон.txt", "соль/notunicode", "соль/питон.txt"}, got); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
}

// TestFirstRootWins: roots of an environment are searched in order; the
// first holding a path serves it (roots.find_file), a later root serves
// what the earlier ones lack, and a listing is their union.
func TestFirstRootWins(t *testing.T) {
	a := tree(t, map[string]string{"motd": "from a", "only-a": "a"})
	b := tree(t, map[string]string{"motd": "from b", "only-b": "b", "dir/x": "x"})
	s := New(map[string][]string{"base": {filepath.Join(t.TempDir(), "absent"), a, b}})
	for url, want := range map[string]string{"salt://motd": "from a", "salt://only-b": "b", "salt://dir/x": "x"} {
		_, data, err := s.Read(url, "base", -1)
		if err != nil || string(data) != want {
			t.Errorf("Read(%s) = %q, %v; want %q", url, data, err, want)
		}
	}
	// A directory in an earlier root does not hide a file in a later one.
	c := tree(t, map[string]string{"motd/": ""})
	s = New(map[string][]string{"base": {c, b}})
	if _, data, err := s.Read("salt://motd", "base", -1); err != nil || string(data) != "from b" {
		t.Errorf("Read(salt://motd) past a directory = %q, %v; want from b", data, err)
	}
	s = New(map[string][]string{"base": {a, b}})
	got, _ := s.List("base", "")
	if d := cmp.Diff([]string{"dir/x", "motd", "only-a", "only-b"}, got); d != "" {
		t.Errorf("List (-want +got):\n%s", d)
	}
}

// TestEnvs: "?saltenv=" picks the environment; one that is not
// configured falls back to the "__env__" roots (roots.find_file,
// test_roots.py test_dynamic_file_roots), never to base; an env name with
// a slash is fine as a key (test_file_list_with_slash) but may not climb
// out of an "__env__" root.
func TestEnvs(t *testing.T) {
	base := tree(t, map[string]string{"top.sls": "base", "only-base": "x"})
	dev := tree(t, map[string]string{"top.sls": "dev"})
	dyn := t.TempDir()
	for _, env := range []string{"dyn", "qa"} {
		if err := os.MkdirAll(filepath.Join(dyn, env), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dyn, env, "dynamo.sls"), []byte(env), 0o644)
	}
	os.WriteFile(filepath.Join(dyn, "secret"), []byte("above the env roots"), 0o644)

	s := New(map[string][]string{"base": {base}, "dev": {dev}, "foo/bar": {base}})
	for _, tc := range []struct{ url, env, want string }{
		{"salt://top.sls", "base", "base"},
		{"salt://top.sls", "", "base"},
		{"salt://top.sls", "dev", "dev"},
		{"salt://top.sls?saltenv=dev", "base", "dev"},
		{"salt://top.sls?saltenv=base", "dev", "base"},
		{"salt://only-base", "foo/bar", "x"},
	} {
		_, data, err := s.Read(tc.url, tc.env, -1)
		if err != nil || string(data) != tc.want {
			t.Errorf("Read(%s, %s) = %q, %v; want %q", tc.url, tc.env, data, err, tc.want)
		}
	}
	// No fallback to base.
	for _, tc := range []struct{ url, env string }{{"salt://only-base", "dev"}, {"salt://top.sls", "prod"}} {
		if _, err := s.Open(tc.url, tc.env); !errors.Is(err, ErrNotFound) {
			t.Errorf("Open(%s, %s) = %v, want ErrNotFound", tc.url, tc.env, err)
		}
	}
	if d := cmp.Diff([]string{"base", "dev", "foo/bar"}, s.Envs()); d != "" {
		t.Errorf("Envs (-want +got):\n%s", d)
	}

	s = New(map[string][]string{"base": {base}, "__env__": {filepath.Join(dyn, "__env__")}})
	for _, env := range []string{"dyn", "qa"} {
		if _, data, err := s.Read("salt://dynamo.sls", env, -1); err != nil || string(data) != env {
			t.Errorf("Read(salt://dynamo.sls, %s) = %q, %v; want %q", env, data, err, env)
		}
		if got, _ := s.List(env, ""); !cmp.Equal(got, []string{"dynamo.sls"}) {
			t.Errorf("List(%s) = %q", env, got)
		}
	}
	if _, data, err := s.Read("salt://top.sls", "base", -1); err != nil || string(data) != "base" {
		t.Errorf("base beside __env__: %q, %v", data, err)
	}
	for _, env := range []string{"..", ".", "../dyn", "a/b"} {
		if _, err := s.Open("salt://secret", env); err == nil {
			t.Errorf("Open(salt://secret) in env %q through __env__ succeeded", env)
		}
		if _, err := s.Open("salt://dynamo.sls?saltenv="+env, "base"); err == nil {
			t.Errorf("Open(salt://dynamo.sls?saltenv=%s) through __env__ succeeded", env)
		}
	}
}

// TestEscapes: nothing outside a root is served or listed, whatever the
// path: test_roots.py test_find_file_not_in_root and
// test_serve_file_not_in_root ("../bar", an absolute path to it), and
// more: NUL, a percent-encoded "..", a '|'-escaped "..", symlinks out.
func TestEscapes(t *testing.T) {
	top := t.TempDir()
	root := filepath.Join(top, "root")
	os.WriteFile(filepath.Join(top, "bar"), []byte("Bad file"), 0o644)
	os.MkdirAll(filepath.Join(top, "outdir"), 0o755)
	os.WriteFile(filepath.Join(top, "outdir", "shadow"), []byte("Bad file"), 0o644)
	os.MkdirAll(filepath.Join(root, "sub", "%2e%2e"), 0o755)
	os.WriteFile(filepath.Join(root, "sub", "%2e%2e", "bar"), []byte("literal"), 0o644)
	os.WriteFile(filepath.Join(root, "ok"), []byte("ok"), 0o644)
	symlink(t, filepath.Join(top, "bar"), filepath.Join(root, "abs-link"))
	symlink(t, "../bar", filepath.Join(root, "rel-link"))
	symlink(t, "../outdir", filepath.Join(root, "dir-link"))
	symlink(t, "ok", filepath.Join(root, "in-link"))
	symlink(t, "sub", filepath.Join(root, "in-dir"))
	// A root that is a prefix of a sibling's name: Salt's clean_path
	// compares strings with startswith; a root of "root" must not serve
	// "root2".
	os.MkdirAll(filepath.Join(top, "root2"), 0o755)
	os.WriteFile(filepath.Join(top, "root2", "x"), []byte("Bad file"), 0o644)
	symlink(t, "../root2/x", filepath.Join(root, "sibling-link"))

	s := New(map[string][]string{"base": {root}, "__env__": {filepath.Join(top, "__env__")}})
	for _, url := range []string{
		"salt://../bar",
		"salt://sub/../../bar",
		"salt://sub/../ok", // Salt refuses any "../"
		"salt://" + filepath.Join(top, "bar"),
		"salt:///" + filepath.Join(top, "bar"),
		"salt://|../bar",
		"salt://|" + filepath.Join(top, "bar"),
		"salt://ok\x00",
		"salt://%2e%2e/bar",
		"salt://abs-link",
		"salt://rel-link",
		"salt://dir-link/shadow",
		"salt://sibling-link",
		"salt://bar?saltenv=..",
		"salt://root/ok?saltenv=.",
		"salt://",
		"salt://.",
		"salt://sub",
		"salt://" + strings.Repeat("a/", 3000),
		"http://example.com/bar",
		"bar",
	} {
		f, data, err := s.Read(url, "base", -1)
		if err == nil {
			t.Errorf("Read(%q) = %+v, %q; want an error", url, f, data)
			continue
		}
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrRefused) {
			t.Errorf("Read(%q) = %v; want ErrNotFound or ErrRefused", url, err)
		}
	}
	for url, want := range map[string]string{
		"salt://ok":                "ok",
		"salt://in-link":           "ok",
		"salt://in-dir/%2e%2e/bar": "literal",
		"salt://sub/%2e%2e/bar":    "literal",
		"salt://./ok":              "ok",
		"salt://sub//./%2e%2e/bar": "literal",
	} {
		if _, data, err := s.Read(url, "base", -1); err != nil || string(data) != want {
			t.Errorf("Read(%q) = %q, %v; want %q", url, data, err, want)
		}
	}
	files, err := s.List("base", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"in-dir/%2e%2e/bar", "in-link", "ok", "sub/%2e%2e/bar"}
	if d := cmp.Diff(want, files); d != "" {
		t.Errorf("List: a symlink out of the root must not be listed (-want +got):\n%s", d)
	}
	if _, err := s.List("base", "../"); err != nil {
		t.Errorf("List(../) = %v", err)
	}
	if got, _ := s.List("base", "../outdir/"); len(got) != 0 {
		t.Errorf("List(../outdir/) = %q, want nothing", got)
	}
	if _, _, err := s.ListDir("salt://dir-link", "base"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListDir(salt://dir-link) = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ListDir("salt://../outdir", "base"); !errors.Is(err, ErrRefused) {
		t.Errorf("ListDir(salt://../outdir) = %v, want ErrRefused", err)
	}
}

// TestSymlinkLoop: a listing through a symlink to an ancestor ends.
func TestSymlinkLoop(t *testing.T) {
	root := tree(t, map[string]string{"a/b/f": "f"})
	symlink(t, "..", filepath.Join(root, "a", "b", "up"))
	symlink(t, "self", filepath.Join(root, "self"))
	s := New(map[string][]string{"base": {root}})
	files, dirs, err := s.ListDir("salt://a", "base")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a/b/f"}, files); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"a/b"}, dirs); d != "" {
		t.Errorf("dirs (-want +got):\n%s", d)
	}
}

// TestSLSPath follows fileclient.get_state: "a.b" is a/b.sls, else
// a/b/init.sls, each tried in every root before the next form; and
// salt/state.py's error for an SLS found nowhere.
func TestSLSPath(t *testing.T) {
	r1 := tree(t, map[string]string{"web/init.sls": "", "web/nginx/init.sls": "", "db.sls": "", "x/init.sls": ""})
	r2 := tree(t, map[string]string{"web.sls": "", "db/init.sls": "", "deep/a/b/c.sls": ""})
	s := New(map[string][]string{"base": {r1, r2}})
	for _, tc := range []struct{ sls, want string }{
		{"web", filepath.Join(r2, "web.sls")}, // a/b.sls in a later root beats a/b/init.sls
		{"db", filepath.Join(r1, "db.sls")},
		{"web.nginx", filepath.Join(r1, "web/nginx/init.sls")},
		{"deep.a.b.c", filepath.Join(r2, "deep/a/b/c.sls")},
		{"x", filepath.Join(r1, "x/init.sls")},
	} {
		got, err := s.SLSPath("base", tc.sls)
		if err != nil || got != tc.want {
			t.Errorf("SLSPath(base, %s) = %q, %v; want %q", tc.sls, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ env, sls, msg string }{
		{"base", "nope", "No matching sls found for 'nope' in env 'base'"},
		{"", "nope", "No matching sls found for 'nope' in env 'base'"},
		{"dev", "web", "No matching sls found for 'web' in env 'dev'"},
		{"base", "..web", ""},
		{"base", "/etc/passwd", ""},
		{"base", "", ""},
	} {
		_, err := s.SLSPath(tc.env, tc.sls)
		if err == nil || (tc.msg != "" && err.Error() != tc.msg) {
			t.Errorf("SLSPath(%s, %q) = %v; want %q", tc.env, tc.sls, err, tc.msg)
		}
	}
}

// TestList: cp.list_master's prefix is a string prefix once '/' is
// stripped from its ends (salt/fileserver/__init__.py Fileserver.file_list:
// "web/" matches "webapp/"), and listings hold only regular files.
func TestList(t *testing.T) {
	root := tree(t, map[string]string{"web/a": "", "webapp/b": "", "web/sub/c": "", "other": "", "empty/": ""})
	s := New(map[string][]string{"base": {root}})
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"web", []string{"web/a", "web/sub/c", "webapp/b"}},
		{"/web/", []string{"web/a", "web/sub/c", "webapp/b"}}, // prefix.strip("/") in Fileserver.file_list
		{"web/s", []string{"web/sub/c"}},
		{"nope/x", nil},
	} {
		got, err := s.List("base", tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			got = nil
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("List(%q) (-want +got):\n%s", tc.prefix, d)
		}
	}
	if got, _ := s.List("nope", ""); len(got) != 0 {
		t.Errorf("List of an unknown env = %q", got)
	}
}

// TestListDir is what file.recurse sees: cp.list_master and
// list_master_dirs under the directory (test_roots.py test_dir_list,
// test_file_list_emptydirs), over all roots; and file.recurse's error for
// a directory no root holds.
func TestListDir(t *testing.T) {
	r1 := tree(t, map[string]string{"conf/a": "", "conf/sub/b": "", "conf/empty/": "", "confx/no": ""})
	r2 := tree(t, map[string]string{"conf/c": "", "conf/sub2/": ""})
	s := New(map[string][]string{"base": {r1, r2}})
	for _, url := range []string{"salt://conf", "salt://conf/", "salt://conf?saltenv=base"} {
		files, dirs, err := s.ListDir(url, "base")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"conf/a", "conf/c", "conf/sub/b"}, files); d != "" {
			t.Errorf("ListDir(%s) files (-want +got):\n%s", url, d)
		}
		if d := cmp.Diff([]string{"conf/empty", "conf/sub", "conf/sub2"}, dirs); d != "" {
			t.Errorf("ListDir(%s) dirs (-want +got):\n%s", url, d)
		}
	}
	files, dirs, err := s.ListDir("salt://", "base")
	if err != nil || len(files) != 4 || len(dirs) != 5 {
		t.Errorf("ListDir(salt://) = %q, %q, %v", files, dirs, err)
	}
	_, _, err = s.ListDir("salt://nope", "base")
	if want := "The directory 'nope' does not exist on the salt fileserver in saltenv 'base'"; err == nil || err.Error() != want {
		t.Errorf("ListDir(salt://nope) = %v, want %q", err, want)
	}
	if _, _, err := s.ListDir("salt://conf/a", "base"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListDir of a file = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ListDir("salt://conf", "dev"); !errors.Is(err, ErrNotFound) {
		t.Errorf("ListDir in an unknown env = %v, want ErrNotFound", err)
	}
}

// TestHashCache: a file's hash is kept while its size, mtime and inode
// stay (roots.file_hash keeps "hash:mtime"); any of them changing reads it
// again.
func TestHashCache(t *testing.T) {
	root := tree(t, map[string]string{"f": "one"})
	p := filepath.Join(root, "f")
	s := New(map[string][]string{"base": {root}})
	s.ttl = 0 // look at the disk each time (TestLookupTTL tests the TTL)
	open := func() File {
		t.Helper()
		f, err := s.Open("salt://f", "base")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f1 := open()
	if f1.SHA256 != hexSum("one") {
		t.Fatalf("hash = %s", f1.SHA256)
	}
	// Rewrite in place with the same size, and put the mtime back: the
	// cache cannot tell, and must not have read it again.
	fh, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("two"), 0)
	fh.Close()
	os.Chtimes(p, f1.ModTime, f1.ModTime)
	if f := open(); f.SHA256 != hexSum("one") {
		t.Errorf("unchanged stamp: hash = %s, want the cached one (the file was hashed again)", f.SHA256)
	}
	// A new mtime.
	later := f1.ModTime.Add(time.Second)
	os.Chtimes(p, later, later)
	if f := open(); f.SHA256 != hexSum("two") {
		t.Errorf("after mtime change: hash = %s, want %s", f.SHA256, hexSum("two"))
	}
	// A new size, mtime put back.
	os.WriteFile(p, []byte("three"), 0o644)
	os.Chtimes(p, later, later)
	if f, data, _ := s.Read("salt://f", "base", -1); f.SHA256 != hexSum("three") || string(data) != "three" || f.Size != 5 {
		t.Errorf("after size change: %+v, %q", f, data)
	}
	// A new inode (an editor's save by rename), same size and mtime.
	tmp := filepath.Join(root, ".f.tmp")
	os.WriteFile(tmp, []byte("four!"), 0o644)
	os.Chtimes(tmp, later, later)
	os.Rename(tmp, p)
	if f := open(); f.SHA256 != hexSum("four!") {
		t.Errorf("after rename over: hash = %s, want %s", f.SHA256, hexSum("four!"))
	}
}

// TestLookupTTL: within LookupTTL a lookup is not repeated (the disk is
// not looked at for each of ten thousand devices); after it, a change,
// an appearing or a vanishing file shows.
func TestLookupTTL(t *testing.T) {
	root := tree(t, map[string]string{"f": "one", "d/a": "a"})
	s := New(map[string][]string{"base": {root}})
	now := time.Unix(1e9, 0)
	s.now = func() time.Time { return now }
	read := func(url string) string {
		t.Helper()
		_, data, err := s.Read(url, "base", MaxFileBytes)
		if err != nil {
			return err.Error()
		}
		return string(data)
	}
	if got := read("salt://f"); got != "one" {
		t.Fatalf("read = %q", got)
	}
	if got := read("salt://new"); got != "salt://new not found in saltenv 'base'" {
		t.Fatalf("read(new) = %q", got)
	}
	files, _, _ := s.ListDir("salt://d", "base")
	os.WriteFile(filepath.Join(root, "f"), []byte("two!"), 0o644)
	os.WriteFile(filepath.Join(root, "new"), []byte("new"), 0o644)
	os.WriteFile(filepath.Join(root, "d", "b"), []byte("b"), 0o644)
	now = now.Add(LookupTTL - time.Millisecond)
	if got := read("salt://f"); got != "one" {
		t.Errorf("within the TTL: read = %q, want the remembered one", got)
	}
	if got := read("salt://./new"); !strings.Contains(got, "not found") || !strings.HasPrefix(got, "salt://./new") {
		t.Errorf("within the TTL: read(new) = %q, want not found, naming the URL asked", got)
	}
	if got, _, _ := s.ListDir("salt://d/", "base"); !cmp.Equal(got, files) {
		t.Errorf("within the TTL: ListDir = %q, want %q", got, files)
	}
	now = now.Add(time.Millisecond)
	if got := read("salt://f"); got != "two!" {
		t.Errorf("after the TTL: read = %q", got)
	}
	if got := read("salt://new"); got != "new" {
		t.Errorf("after the TTL: read(new) = %q", got)
	}
	if got, _, _ := s.ListDir("salt://d", "base"); !cmp.Equal(got, []string{"d/a", "d/b"}) {
		t.Errorf("after the TTL: ListDir = %q", got)
	}
	os.Remove(filepath.Join(root, "new"))
	now = now.Add(LookupTTL)
	if got := read("salt://new"); !strings.Contains(got, "not found") {
		t.Errorf("removed: read(new) = %q", got)
	}
}

// TestReadLimits: Read refuses a file over its limit with ErrTooLarge and
// still says what the file is; large files are hashed, not kept.
func TestReadLimits(t *testing.T) {
	big := strings.Repeat("x", MaxFileBytes+1)
	root := tree(t, map[string]string{"big": big, "max": big[:MaxFileBytes]})
	s := New(map[string][]string{"base": {root}})
	f, data, err := s.Read("salt://big", "base", MaxFileBytes)
	if !errors.Is(err, ErrTooLarge) || data != nil || f.Size != MaxFileBytes+1 || f.SHA256 != hexSum(big) {
		t.Errorf("Read(big) = %+v, %d bytes, %v", f, len(data), err)
	}
	if _, data, err := s.Read("salt://max", "base", MaxFileBytes); err != nil || len(data) != MaxFileBytes {
		t.Errorf("Read(max) = %d bytes, %v", len(data), err)
	}
	if _, data, err := s.Read("salt://big", "base", -1); err != nil || string(data) != big {
		t.Errorf("Read(big, no limit) = %d bytes, %v", len(data), err)
	}
}

// TestConcurrent: one Server shared by many goroutines while the file
// changes under them: each answer is a consistent (bytes, hash) pair of
// one version (run with -race).
func TestConcurrent(t *testing.T) {
	root := tree(t, map[string]string{"f": "v0"})
	p := filepath.Join(root, "f")
	s := New(map[string][]string{"base": {root}})
	stop := make(chan struct{})
	writer := make(chan struct{})
	go func() {
		defer close(writer)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tmp := p + ".tmp"
			os.WriteFile(tmp, []byte(strings.Repeat("v", i%7+1)), 0o644)
			os.Rename(tmp, p)
		}
	}()
	errs := make(chan string, 8)
	var readers sync.WaitGroup
	for g := 0; g < 8; g++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for i := 0; i < 300; i++ {
				f, data, err := s.Read("salt://f", "base", MaxFileBytes)
				if err != nil {
					errs <- err.Error()
					return
				}
				if f.SHA256 != hexSum(string(data)) || f.Size != int64(len(data)) {
					errs <- "hash and bytes disagree: " + f.SHA256 + " " + string(data)
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	<-writer
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
