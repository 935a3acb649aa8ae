package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/halite-fleet/halite/state"
)

// salt/states/file.py replace over salt/modules/file.py replace; cases
// from tests/pytests/functional/states/file/test_replace.py (test_replace,
// issue 18612 append/prepend/not_found_content/mid-line, 18841 no
// changes and no backup).
func TestReplace(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	name := filepath.Join(root, "f")
	os.WriteFile(name, []byte("change_me"), 0o640)
	test, run := converge(t, h, root, "file.replace", name, map[string]any{"pattern": "change", "repl": "salt", "backup": false})
	if test.Comment != "Changes would have been made" || run.Comment != "Changes were made" {
		t.Errorf("comments %q %q", test.Comment, run.Comment)
	}
	if want := "--- \n+++ \n@@ -1 +1 @@\n-change_me+salt_me"; run.Changes["diff"] != want {
		t.Errorf("diff %q, want %q", run.Changes["diff"], want)
	}
	if readFile(t, name) != "salt_me" || mode(t, name) != "0640" {
		t.Errorf("content %q mode %s", readFile(t, name), mode(t, name))
	}
	if lexists(name + ".bak") {
		t.Error("backup=False made a backup")
	}
	if r := apply(t, h, "file.replace", name, false, map[string]any{"pattern": "change", "repl": "salt"}); r.Comment != "No changes needed to be made" {
		t.Errorf("no change comment %q", r.Comment)
	}

	contents := "#en_US.UTF-8\nsome other text\n"
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"prepend", map[string]any{"prepend_if_not_found": true}, "en_US.UTF-8\n" + contents},
		{"append", map[string]any{"append_if_not_found": true}, contents + "en_US.UTF-8\n"},
		{"not_found_content", map[string]any{"append_if_not_found": true, "not_found_content": "THIS LINE WASN'T FOUND! SO WE'RE APPENDING IT HERE!"},
			contents + "THIS LINE WASN'T FOUND! SO WE'RE APPENDING IT HERE!\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(root, tc.name)
			os.WriteFile(p, []byte(contents), 0o644)
			args := map[string]any{"pattern": "^# en_US.UTF-8$", "repl": "en_US.UTF-8"}
			for k, v := range tc.args {
				args[k] = v
			}
			converge(t, h, root, "file.replace", p, args)
			if got := readFile(t, p); got != tc.want {
				t.Errorf("content %q, want %q", got, tc.want)
			}
			if got := readFile(t, p+".bak"); got != contents {
				t.Errorf("backup %q", got)
			}
		})
	}
	// Salt's CRLF-tolerant idiom, a backreference in repl, count, flags.
	p := filepath.Join(root, "mid")
	os.WriteFile(p, []byte("first\n#foo=bar\nlast\n"), 0o644)
	converge(t, h, root, "file.replace", p, map[string]any{"pattern": `^#foo=bar($|(?=\r\n))`, "repl": "foo=salt"})
	if got := readFile(t, p); got != "first\nfoo=salt\nlast\n" {
		t.Errorf("idiom: %q", got)
	}
	os.WriteFile(p, []byte("a=1\nA=2\na=3\n"), 0o644)
	converge(t, h, root, "file.replace", p, map[string]any{"pattern": `^a=(\d)`, "repl": `b=\g<1>$`, "flags": []any{"IGNORECASE", "MULTILINE"}})
	if got := readFile(t, p); got != "b=1$\nb=2$\nb=3$\n" {
		t.Errorf("backreference/flags: %q", got)
	}
	// count: as re.subn, the first matches only (a second run takes the
	// next ones, as Salt's).
	os.WriteFile(p, []byte("a=1\nA=2\na=3\n"), 0o644)
	apply(t, h, "file.replace", p, false, map[string]any{"pattern": `^a=(\d)`, "repl": `b=\1`, "count": 1, "flags": 10})
	if got := readFile(t, p); got != "b=1\nA=2\na=3\n" {
		t.Errorf("count: %q", got)
	}
	// Errors: missing file (ignore_if_missing), binary, look-ahead.
	missing := filepath.Join(root, "nope")
	if r := apply(t, h, "file.replace", missing, false, map[string]any{"pattern": "a", "repl": "b"}); r.Result != state.False || r.Comment != missing+": file not found" {
		t.Errorf("missing: %q", r.Comment)
	}
	if r := apply(t, h, "file.replace", missing, false, map[string]any{"pattern": "a", "repl": "b", "ignore_if_missing": true}); r.Result != state.True || r.Comment != "No changes needed to be made" {
		t.Errorf("ignore_if_missing: %q", r.Comment)
	}
	bin := filepath.Join(root, "bin")
	os.WriteFile(bin, []byte("a\x00b"), 0o644)
	if r := apply(t, h, "file.replace", bin, false, map[string]any{"pattern": "a", "repl": "b"}); r.Result != state.False || r.Comment != "Cannot perform string replacements on a binary file: "+bin {
		t.Errorf("binary: %q", r.Comment)
	}
	if r := apply(t, h, "file.replace", p, false, map[string]any{"pattern": "a(?!b)", "repl": "b"}); r.Result != state.False || !strings.Contains(r.Comment, "RE2") {
		t.Errorf("look-ahead: %q", r.Comment)
	}
}

// salt/modules/file.py _set_line, table from
// tests/pytests/unit/modules/file/test_file_line.py.
func TestSetLine(t *testing.T) {
	s := func(v string) *string { return &v }
	cases := []struct {
		name           string
		lines          []string
		content, match *string
		mode, location string
		before, after  *string
		want           []string
		err            string
	}{
		{"insert end indent", []string{"   \t\t\t   fnord"}, s("roscivs"), nil, "insert", "end", nil, nil, []string{"   \t\t\t   fnord", "   \t\t\t   roscivs"}, ""},
		{"insert start", []string{"foo\n", "bar\n"}, s("roscivs"), nil, "insert", "start", nil, nil, []string{"roscivs\n", "foo\n", "bar\n"}, ""},
		{"insert empty start", nil, s("roscivs"), nil, "insert", "start", nil, nil, []string{"roscivs\n"}, ""},
		{"insert before/after", []string{"foo", "bar", " after", "belowme", " before"}, s("roscivs"), nil, "insert", "", s("before"), s("after"),
			[]string{"foo", "bar", " after", "belowme", " roscivs", " before"}, ""},
		{"insert after", []string{"foo", "after", "bar"}, s("roscivs"), nil, "insert", "", nil, s("after"), []string{"foo", "after", "roscivs", "bar"}, ""},
		{"insert after already there", []string{"foo", "after", "roscivs"}, s("roscivs"), nil, "insert", "", nil, s("after"), []string{"foo", "after", "roscivs"}, ""},
		{"insert before first wraps like Python", []string{"before", "roscivs"}, s("roscivs"), nil, "insert", "", s("before"), nil, []string{"before", "roscivs"}, ""},
		{"insert no location", []string{"a"}, s("x"), nil, "insert", "", nil, nil, nil, `On insert either "location" or "before/after" conditions are required.`},
		{"insert two afters", []string{"after", "after"}, s("x"), nil, "insert", "", nil, s("after"), nil, `Found more than expected occurrences in "after" expression`},
		{"delete", []string{"a\n", "b\n", "a\n"}, s("a"), nil, "delete", "", nil, nil, []string{"b\n"}, ""},
		{"replace", []string{"  foo\n", "bar\n"}, s("baz"), s("foo"), "replace", "", nil, nil, []string{"  baz", "bar\n"}, ""},
		{"ensure after", []string{"a", "b"}, s("x"), nil, "ensure", "", nil, s("a"), []string{"a", "x", "b"}, ""},
		{"ensure between", []string{"a", "y", "b"}, s("x"), nil, "ensure", "", s("b"), s("a"), []string{"a", "x", "b"}, ""},
		{"ensure between too far", []string{"a", "y", "z", "b"}, s("x"), nil, "ensure", "", s("b"), s("a"), nil, `Found more than one line between boundaries "before" and "after".`},
		{"ensure nowhere", []string{"a"}, s("x"), nil, "ensure", "", nil, nil, nil, "Wrong conditions? Unable to ensure line without knowing where to put it before and/or after."},
		{"bad mode", []string{"a"}, s("x"), nil, "bogus", "", nil, nil, nil, "Unknown mode: bogus"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := setLine(append([]string(nil), tc.lines...), tc.content, tc.match, tc.mode, tc.location, tc.before, tc.after, true)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(got, tc.want) {
				t.Errorf("%s", cmp.Diff(tc.want, got))
			}
		})
	}
}

// salt/states/file.py line; tests/pytests/functional/states/file/test_line.py
// and test_file_line.py's line-ending cases.
func TestLine(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	name := filepath.Join(root, "cfg")
	os.WriteFile(name, []byte("file_roots:\n  base:\n    - /srv/salt\n"), 0o644)
	test, run := converge(t, h, root, "file.line", name, map[string]any{"content": "- /srv/sugar", "mode": "ensure", "after": "- /srv/salt"})
	if test.Comment != "Changes would be made" || run.Comment != "Changes were made" {
		t.Errorf("comments %q %q", test.Comment, run.Comment)
	}
	if got := readFile(t, name); got != "file_roots:\n  base:\n    - /srv/salt\n    - /srv/sugar\n" {
		t.Errorf("content %q", got)
	}
	if want := "--- \n+++ \n@@ -1,3 +1,4 @@\n file_roots:\n   base:\n     - /srv/salt\n+    - /srv/sugar\n"; run.Changes["diff"] != want {
		t.Errorf("diff %q, want %q", run.Changes["diff"], want)
	}
	if r := apply(t, h, "file.line", name, false, map[string]any{"content": "- /srv/sugar", "mode": "ensure", "after": "- /srv/salt"}); r.Comment != "No changes needed to be made" {
		t.Errorf("again: %q", r.Comment)
	}
	converge(t, h, root, "file.line", name, map[string]any{"match": "sugar", "mode": "delete"})
	if got := readFile(t, name); got != "file_roots:\n  base:\n    - /srv/salt\n" {
		t.Errorf("delete: %q", got)
	}
	// insert with a location inserts on every run, as Salt's _set_line
	// (ensure is the idempotent mode).
	apply(t, h, "file.line", name, false, map[string]any{"content": "everything: fantastic", "mode": "insert", "location": "start"})
	if got := readFile(t, name); !strings.HasPrefix(got, "everything: fantastic\nfile_roots:") {
		t.Errorf("insert start: %q", got)
	}
	// create=True makes the file (managed with replace=False) first.
	n2 := filepath.Join(root, "new")
	r := apply(t, h, "file.line", n2, false, map[string]any{"content": "x", "mode": "insert", "location": "start", "create": true})
	if r.Result != state.True || readFile(t, n2) != "x\n" {
		t.Errorf("create: %v %q", r.Result.Value(), r.Comment)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"content": "x"}, "Mode was not defined. How to process the file?"},
		{map[string]any{"mode": "insert", "location": "end"}, "Content can only be empty if mode is ['delete']"},
		{map[string]any{"content": "x", "mode": "bogus"}, "Unknown mode: bogus"},
	} {
		if r := apply(t, h, "file.line", name, false, tc.args); r.Result != state.False || r.Comment != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, r.Comment, tc.want)
		}
	}
	if r := apply(t, h, "file.line", filepath.Join(root, "missing"), false, map[string]any{"content": "x", "mode": "ensure"}); r.Result != state.False || r.Comment != filepath.Join(root, "missing")+": file not found" {
		t.Errorf("missing: %q", r.Comment)
	}
}

// salt/states/file.py append; tests/pytests/functional/states/file/test_append.py
// (test_append, 1864 makedirs, 2227 percent sign, 2379 commented text).
func TestAppend(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	name := filepath.Join(root, "testfile")
	os.WriteFile(name, []byte("#salty!"), 0o644)
	test, run := converge(t, h, root, "file.append", name, map[string]any{"text": "cheese"})
	if test.Comment != "File "+name+" is set to be updated" || run.Comment != "Appended 1 lines" {
		t.Errorf("comments %q %q", test.Comment, run.Comment)
	}
	if got := readFile(t, name); got != "#salty!\ncheese\n" {
		t.Errorf("content %q", got)
	}
	if want := "--- \n\n+++ \n\n@@ -1 +1,2 @@\n\n #salty!\n+cheese"; run.Changes["diff"] != want {
		t.Errorf("diff %q, want %q", run.Changes["diff"], want)
	}
	if r := apply(t, h, "file.append", name, false, map[string]any{"text": "cheese"}); r.Comment != "File "+name+" is in correct state" {
		t.Errorf("again %q", r.Comment)
	}
	// 2227: a percent sign and quotes; whitespace-insensitive match.
	converge(t, h, root, "file.append", name, map[string]any{"text": "HISTTIMEFORMAT='%F %T '"})
	if r := apply(t, h, "file.append", name, false, map[string]any{"text": "  HISTTIMEFORMAT='%F %T '  "}); len(r.Changes) != 0 {
		t.Errorf("whitespace variant appended again: %v", r.Changes)
	}
	// 2379: commented lines do not count as present.
	p := filepath.Join(root, "sshd")
	os.WriteFile(p, []byte("hello\nworld\n#PermitRootLogin yes\n# PermitRootLogin yes\n"), 0o644)
	_, run = converge(t, h, root, "file.append", p, map[string]any{"text": "PermitRootLogin yes"})
	if run.Comment != "Appended 1 lines" {
		t.Errorf("2379: %q", run.Comment)
	}
	// 1864: makedirs and a missing file.
	deep := filepath.Join(root, "issue_1864", "f")
	if r := apply(t, h, "file.append", deep, false, map[string]any{"text": "cheese", "makedirs": true}); r.Result != state.True || readFile(t, deep) != "cheese\n" {
		t.Errorf("makedirs: %v %q", r.Result.Value(), r.Comment)
	}
	// Lists, sources.
	l := filepath.Join(root, "list")
	os.WriteFile(l, nil, 0o644)
	converge(t, h, root, "file.append", l, map[string]any{"text": []any{"a", "b\nc"}})
	if got := readFile(t, l); got != "a\nb\nc\n" {
		t.Errorf("list: %q", got)
	}
	converge(t, h, root, "file.append", l, map[string]any{"source": "salt://more", "__files__": files("salt://more", "d\ne\n")})
	if got := readFile(t, l); got != "a\nb\nc\nd\ne\n" {
		t.Errorf("source: %q", got)
	}
}
