package state

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/state"
)

// salt/states/file.py recurse over the master's inlined directory;
// tests/pytests/functional/states/file/test_recurse.py (test_recurse,
// clean, include_empty, issue 2726 mode).
func TestRecurse(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	dst := filepath.Join(root, "site")
	fs := map[string]any{}
	for u, d := range map[string]string{"salt://web/index.html": "<h1>hi</h1>\n", "salt://web/css/a.css": "a{}\n", "salt://web2/x": "no\n"} {
		for k, v := range files(u, d) {
			fs[k] = v
		}
	}
	args := map[string]any{"source": "salt://web", "__files__": fs, "__dirs__": []any{"salt://web", "salt://web/css", "salt://web/empty"},
		"file_mode": "0640", "dir_mode": "0750"}
	test, run := converge(t, h, root, "file.recurse", dst, args)
	if test.Result != state.None {
		t.Errorf("test result %v", test.Result.Value())
	}
	if got := readFile(t, filepath.Join(dst, "css", "a.css")); got != "a{}\n" {
		t.Errorf("a.css %q", got)
	}
	if lexists(filepath.Join(dst, "x")) || lexists(filepath.Join(dst, "empty")) {
		t.Error("recurse copied what is not under the source, or an empty dir without include_empty")
	}
	if mode(t, filepath.Join(dst, "index.html")) != "0640" || mode(t, filepath.Join(dst, "css")) != "0750" {
		t.Errorf("modes %s %s", mode(t, filepath.Join(dst, "index.html")), mode(t, filepath.Join(dst, "css")))
	}
	want := map[string]any{"diff": "New file", "mode": "0640"}
	if got := run.Changes[filepath.Join(dst, "index.html")]; !cmp.Equal(got, want) {
		t.Errorf("changes of index.html %v", got)
	}
	if run.Comment != "Recursively updated "+dst {
		t.Errorf("comment %q", run.Comment)
	}
	if r := apply(t, h, "file.recurse", dst, false, args); r.Comment != "The directory "+dst+" is in the correct state" {
		t.Errorf("again %q", r.Comment)
	}
	// clean removes what the master does not have; include_empty makes
	// the empty directory.
	os.WriteFile(filepath.Join(dst, "stale"), []byte("x"), 0o644)
	args["clean"] = true
	args["include_empty"] = true
	_, run = converge(t, h, root, "file.recurse", dst, args)
	if !cmp.Equal(run.Changes["removed"], []any{filepath.Join(dst, "stale")}) || !isDir(filepath.Join(dst, "empty")) {
		t.Errorf("clean/include_empty: %v", run.Changes)
	}
	// Errors: no such directory; mode; not salt://; a hostile file name.
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"source": "salt://nope"}, "The directory 'nope' does not exist on the salt fileserver in saltenv 'base'"},
		{map[string]any{"source": "salt://web", "mode": "0644"}, "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'."},
		{map[string]any{"source": "/srv/web"}, "Invalid source '/srv/web' (must be a salt:// URI)"},
	} {
		if r := apply(t, h, "file.recurse", dst, false, tc.args); r.Result != state.False || r.Comment != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, r.Comment, tc.want)
		}
	}
	evil := t.TempDir()
	bad := map[string]any{"source": "salt://web", "__files__": files("salt://web/../../escape", "x")}
	apply(t, h, "file.recurse", filepath.Join(evil, "d"), false, bad)
	if lexists(filepath.Join(filepath.Dir(evil), "escape")) || lexists(filepath.Join(evil, "escape")) {
		t.Error("a ../ name from the master escaped the target")
	}
}

type entry struct {
	name, body, link string
	dir              bool
}

func tarGz(t *testing.T, ents []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(e.body))
	}
	tw.Close()
	gz.Close()
	return b.Bytes()
}

func zipOf(t *testing.T, ents []entry) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range ents {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.body))
	}
	zw.Close()
	return b.Bytes()
}

func fileMap(url string, data []byte) map[string]any {
	return map[string]any{url: map[string]any{"data": data}}
}

// salt/states/archive.py extracted; cases after
// tests/pytests/functional/states/test_archive.py and
// tests/pytests/unit/states/test_archive.py (enforce_toplevel, if_missing,
// source_hash, clean).
func TestArchiveExtracted(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	dst := filepath.Join(root, "opt")
	data := tarGz(t, []entry{{name: "app/", dir: true}, {name: "app/bin/run", body: "#!/bin/sh\n"}, {name: "app/README", body: "hi\n"}, {name: "app/cur", link: "bin"}})
	args := map[string]any{"source": "salt://app.tar.gz", "__files__": fileMap("salt://app.tar.gz", data)}
	test, run := convergeOpt(t, h, root, "archive.extracted", dst, args, false)
	if test.Comment != "Archive salt://app.tar.gz would be extracted to "+dst+"/, due to absence of one or more files/dirs" {
		t.Errorf("test comment %q", test.Comment)
	}
	if run.Comment != "salt://app.tar.gz extracted to "+dst+"/, due to absence of one or more files/dirs. Output was trimmed to False number of lines" {
		t.Errorf("comment %q", run.Comment)
	}
	if want := []any{"app", "app/bin/run", "app/README", "app/cur"}; !cmp.Equal(run.Changes["extracted_files"], want) {
		t.Errorf("extracted_files %v", run.Changes["extracted_files"])
	}
	if !cmp.Equal(run.Changes["directories_created"], []any{dst + "/"}) {
		t.Errorf("directories_created %v", run.Changes["directories_created"])
	}
	if readFile(t, filepath.Join(dst, "app", "cur", "run")) != "#!/bin/sh\n" {
		t.Error("content or link wrong")
	}
	if r := apply(t, h, "archive.extracted", dst, false, args); r.Comment != "All files in archive are already present" {
		t.Errorf("again %q", r.Comment)
	}
	// zip, enforce_toplevel, if_missing, source_hash.
	z := zipOf(t, []entry{{name: "a.txt", body: "a"}, {name: "b/c.txt", body: "c"}})
	zargs := map[string]any{"source": "salt://x.zip", "__files__": fileMap("salt://x.zip", z)}
	d2 := filepath.Join(root, "z")
	if r := apply(t, h, "archive.extracted", d2, false, zargs); r.Result != state.False || !strings.HasPrefix(r.Comment, "Archive does not have a single top-level directory. To allow this archive to be extracted, set 'enforce_toplevel' to False. To avoid a 'zip-bomb'") {
		t.Errorf("enforce_toplevel: %q", r.Comment)
	}
	zargs["enforce_toplevel"] = false
	convergeOpt(t, h, root, "archive.extracted", d2, zargs, false)
	if readFile(t, filepath.Join(d2, "b", "c.txt")) != "c" {
		t.Error("zip content")
	}
	if r := apply(t, h, "archive.extracted", filepath.Join(root, "q"), false, map[string]any{"source": "salt://x.zip", "if_missing": d2}); r.Result != state.True || r.Comment != "Path "+d2+" exists" {
		t.Errorf("if_missing: %q", r.Comment)
	}
	zargs["source_hash"] = "md5=" + strings.Repeat("a", 32)
	if r := apply(t, h, "archive.extracted", filepath.Join(root, "q"), false, zargs); r.Result != state.False || r.Comment != "salt://x.zip does not match the desired source_hash "+strings.Repeat("a", 32) {
		t.Errorf("source_hash: %q", r.Comment)
	}
	if r := apply(t, h, "archive.extracted", filepath.Join(root, "q"), false, map[string]any{"source": "salt://x.bin", "__files__": fileMap("salt://x.bin", z)}); r.Result != state.False ||
		r.Comment != "Could not guess archive_format from the value of the 'source' argument. Please set this archive_format to one of the following: tar, rar, zip" {
		t.Errorf("format: %q", r.Comment)
	}
	// strip-components
	d3 := filepath.Join(root, "s")
	convergeOpt(t, h, root, "archive.extracted", d3, map[string]any{"source": "salt://app.tar.gz", "__files__": fileMap("salt://app.tar.gz", data),
		"options": "--strip-components=1", "enforce_toplevel": false}, false)
	if readFile(t, filepath.Join(d3, "README")) != "hi\n" {
		t.Error("strip-components")
	}
	// clean: a changed archive replaces the old top-level content.
	data2 := tarGz(t, []entry{{name: "app/", dir: true}, {name: "app/NEW", body: "new\n"}})
	args2 := map[string]any{"source": "salt://app.tar.gz", "__files__": fileMap("salt://app.tar.gz", data2), "clean": true}
	_, run = convergeOpt(t, h, root, "archive.extracted", dst, args2, false)
	if lexists(filepath.Join(dst, "app", "README")) || !cmp.Equal(run.Changes["removed"], []any{dst + "/app/"}) {
		t.Errorf("clean: %v", run.Changes)
	}
}

// An archive is hostile input: members that would be written outside the
// target refuse the whole archive, before anything is written, and the
// comment names them.
func TestArchiveHostile(t *testing.T) {
	h := newHost(t)
	cases := []struct {
		name string
		ents []entry
		want string
	}{
		{"dotdot", []entry{{name: "app/ok", body: "x"}, {name: "app/../../evil", body: "x"}}, "'app/../../evil' climbs out with '..'"},
		{"absolute", []entry{{name: "/tmp/evil", body: "x"}}, "'/tmp/evil' is an absolute path"},
		{"link out", []entry{{name: "app/l", link: "../../etc"}}, "'app/l' is a symlink to '../../etc', outside the target"},
		{"link absolute", []entry{{name: "app/l", link: "/etc"}}, "'app/l' is a symlink to '/etc', outside the target"},
		{"link chain", []entry{{name: "app/c", link: "."}, {name: "app/a", link: "c/c/c/../.."}}, "'app/a' is a symlink to 'c/c/c/../..', outside the target"},
		{"write through link", []entry{{name: "app/l", link: "."}, {name: "app/l/x", body: "x"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dst := filepath.Join(root, "d")
			os.MkdirAll(dst, 0o755)
			args := map[string]any{"source": "salt://a.tgz", "__files__": fileMap("salt://a.tgz", tarGz(t, tc.ents)), "enforce_toplevel": false}
			before := treeHash(t, root)
			for _, test := range []bool{true, false} {
				r := apply(t, h, "archive.extracted", dst, test, args)
				if tc.want == "" {
					continue
				}
				if r.Result != state.False || !strings.Contains(r.Comment, tc.want) || !strings.Contains(r.Comment, "would be written outside") {
					t.Errorf("test=%v: %v %q, want a refusal naming %q", test, r.Result.Value(), r.Comment, tc.want)
				}
			}
			if tc.want != "" && treeHash(t, root) != before {
				t.Error("a refused archive changed the tree")
			}
			var outside []string
			filepath.WalkDir(filepath.Dir(root), func(p string, d os.DirEntry, err error) error {
				if err == nil && strings.Contains(filepath.Base(p), "evil") {
					outside = append(outside, p)
				}
				return nil
			})
			if len(outside) > 0 {
				t.Errorf("written: %v", outside)
			}
		})
	}
	// zip: a symlink out is refused the same way; modes are kept.
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	hdr := &zip.FileHeader{Name: "app/run.sh", Method: zip.Store}
	hdr.SetMode(0o755)
	w, _ := zw.CreateHeader(hdr)
	w.Write([]byte("#!/bin/sh\n"))
	lh := &zip.FileHeader{Name: "app/etc"}
	lh.SetMode(os.ModeSymlink | 0o777)
	w, _ = zw.CreateHeader(lh)
	w.Write([]byte("../../../etc"))
	zw.Close()
	zroot := t.TempDir()
	r := apply(t, h, "archive.extracted", zroot, false, map[string]any{"source": "salt://a.zip", "__files__": fileMap("salt://a.zip", zb.Bytes())})
	if r.Result != state.False || !strings.Contains(r.Comment, "'app/etc' is a symlink to '../../../etc', outside the target") {
		t.Errorf("zip symlink: %q", r.Comment)
	}
	zb.Reset()
	zw = zip.NewWriter(&zb)
	w, _ = zw.CreateHeader(hdr)
	w.Write([]byte("#!/bin/sh\n"))
	zw.Close()
	r = apply(t, h, "archive.extracted", zroot, false, map[string]any{"source": "salt://a.zip", "__files__": fileMap("salt://a.zip", zb.Bytes())})
	if r.Result != state.True || mode(t, filepath.Join(zroot, "app", "run.sh")) != "0755" {
		t.Errorf("zip mode: %q", r.Comment)
	}
	// A symlink already on the device inside the target is not followed.
	root := t.TempDir()
	dst := filepath.Join(root, "d")
	out := filepath.Join(root, "outside")
	os.MkdirAll(dst, 0o755)
	os.MkdirAll(out, 0o755)
	os.Symlink(out, filepath.Join(dst, "app"))
	r = apply(t, h, "archive.extracted", dst, false, map[string]any{"source": "salt://a.tgz", "__files__": fileMap("salt://a.tgz", tarGz(t, []entry{{name: "app/x", body: "x"}}))})
	if r.Result != state.False || !strings.Contains(r.Comment, "through the symlink") {
		t.Errorf("device symlink: %v %q", r.Result.Value(), r.Comment)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("written through a symlink: %v", ents)
	}
	// Garbage is a failed state, not a panic.
	for _, junk := range [][]byte{nil, []byte("not an archive"), {0x1f, 0x8b, 0, 0}, []byte("PK\x03\x04junk")} {
		for _, src := range []string{"salt://j.tgz", "salt://j.zip"} {
			r := apply(t, h, "archive.extracted", dst, false, map[string]any{"source": src, "__files__": fileMap(src, junk)})
			if r.Result != state.False {
				t.Errorf("%s %q: %v %q", src, junk, r.Result.Value(), r.Comment)
			}
		}
	}
}

// FuzzArchive feeds arbitrary bytes as tar and zip archives: never a
// panic, never a file outside the target.
func FuzzArchive(f *testing.F) {
	f.Add([]byte{}, true)
	f.Add([]byte("PK\x03\x04"), false)
	f.Fuzz(func(t *testing.T, data []byte, isTar bool) {
		h := &fakeHost{cache: t.TempDir()}
		root := t.TempDir()
		dst := filepath.Join(root, "d")
		src := "salt://f.zip"
		if isTar {
			src = "salt://f.tar"
		}
		apply(t, h, "archive.extracted", dst, false, map[string]any{"source": src, "__files__": fileMap(src, data), "enforce_toplevel": false})
		var names []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !underDir(root, p) {
				names = append(names, p)
			}
			return nil
		})
		sort.Strings(names)
		if len(names) > 0 {
			t.Errorf("outside: %v", names)
		}
	})
}

// The small tar reader against archives made by archive/tar (PAX and GNU
// long names, long link targets) and by the system's tar command.
func TestTarReaderFormats(t *testing.T) {
	long := "app/" + strings.Repeat("d", 120) + "/" + strings.Repeat("f", 110)
	for _, format := range []tar.Format{tar.FormatPAX, tar.FormatGNU, tar.FormatUSTAR} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		name := long
		if format == tar.FormatUSTAR {
			name = "app/" + strings.Repeat("d", 120) + "/f" // prefix field
		}
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: 2, Typeflag: tar.TypeReg, Format: format})
		tw.Write([]byte("ok"))
		if format != tar.FormatUSTAR {
			tw.WriteHeader(&tar.Header{Name: "app/l", Linkname: strings.Repeat("x/", 60) + "y", Typeflag: tar.TypeSymlink, Format: format})
		}
		tw.Close()
		var ms []member
		if err := readTar(bytes.NewReader(b.Bytes()), func(m member) error { ms = append(ms, m); return nil }); err != nil {
			t.Fatalf("%v: %v", format, err)
		}
		if len(ms) == 0 || ms[0].raw != name || ms[0].mode != 0o600 {
			t.Fatalf("%v: %+v", format, ms)
		}
		r, _ := ms[0].open()
		if got, _ := io.ReadAll(r); string(got) != "ok" {
			t.Errorf("%v: content %q", format, got)
		}
		if format != tar.FormatUSTAR && (len(ms) != 2 || ms[1].linkname != strings.Repeat("x/", 60)+"y") {
			t.Errorf("%v: link %+v", format, ms[1:])
		}
	}
	tarCmd, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("no tar command")
	}
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "app", strings.Repeat("d", 120)), 0o755)
	os.WriteFile(filepath.Join(src, "app", strings.Repeat("d", 120), strings.Repeat("f", 110)), []byte("deep\n"), 0o640)
	os.Symlink(strings.Repeat("d", 120), filepath.Join(src, "app", "short"))
	out := filepath.Join(t.TempDir(), "a.tar.gz")
	if b, err := exec.Command(tarCmd, "-C", src, "-czf", out, "app").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, b)
	}
	data, _ := os.ReadFile(out)
	h := newHost(t)
	dst := t.TempDir()
	r := apply(t, h, "archive.extracted", dst, false, map[string]any{"source": "salt://a.tar.gz", "__files__": fileMap("salt://a.tar.gz", data)})
	if r.Result != state.True {
		t.Fatal(r.Comment)
	}
	if got := readFile(t, filepath.Join(dst, "app", "short", strings.Repeat("f", 110))); got != "deep\n" {
		t.Errorf("content %q", got)
	}
	if got := mode(t, filepath.Join(dst, "app", "short", strings.Repeat("f", 110))); got != "0640" {
		t.Errorf("mode %s", got)
	}
}
