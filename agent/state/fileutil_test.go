package state

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// Goldens from Python 3's difflib.unified_diff(a, b) as Salt's get_diff
// calls it (salt/utils/stringutils.py get_diff; no file names).
func TestUnifiedDiffGolden(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{"a\nb\nc", "a\nc\n", "--- \n+++ \n@@ -1,3 +1,2 @@\n a\n-b\n-c+c\n"},
		{"", "x\n", "--- \n+++ \n@@ -0,0 +1 @@\n+x\n"},
		{"x\n", "", "--- \n+++ \n@@ -1 +0,0 @@\n-x\n"},
		{"1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\n2\nX\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"--- \n+++ \n@@ -1,6 +1,6 @@\n 1\n 2\n-3\n+X\n 4\n 5\n 6\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
		{"same\n", "same\n", ""},
	}
	for _, tc := range cases {
		got := strings.Join(unifiedDiff(splitLinesKeep(tc.a), splitLinesKeep(tc.b)), "")
		if got != tc.want {
			t.Errorf("diff %q -> %q:\n got %q\nwant %q", tc.a, tc.b, got, tc.want)
		}
	}
}

// The diff against Python's difflib itself, on random edits of files of
// distinct lines (where the longest common subsequence is unique, so
// SequenceMatcher and Myers must agree); skipped without python3.
func TestUnifiedDiffPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	rng := rand.New(rand.NewSource(16))
	type pair struct{ A, B []string }
	var pairs []pair
	for i := 0; i < 200; i++ {
		n := rng.Intn(40)
		var a []string
		for j := 0; j < n; j++ {
			a = append(a, fmt.Sprintf("line %d\n", j))
		}
		var b []string
		next := 1000
		for _, l := range a {
			switch rng.Intn(8) {
			case 0: // delete
			case 1: // replace
				b = append(b, fmt.Sprintf("new %d\n", next))
				next++
			case 2: // insert before
				b = append(b, fmt.Sprintf("new %d\n", next), l)
				next++
			default:
				b = append(b, l)
			}
		}
		pairs = append(pairs, pair{a, b})
	}
	in, _ := json.Marshal(pairs)
	script := `import sys, json, difflib
for p in json.load(sys.stdin):
    print(json.dumps("".join(difflib.unified_diff(p["A"] or [], p["B"] or []))))`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i, p := range pairs {
		var want string
		json.Unmarshal([]byte(lines[i]), &want)
		if got := strings.Join(unifiedDiff(p.A, p.B), ""); got != want {
			t.Fatalf("case %d: got\n%s\nwant\n%s", i, got, want)
		}
	}
}

// A rewrite past maxDiffEdits still gives a correct (coarser) diff, in
// bounded time.
func TestUnifiedDiffBounded(t *testing.T) {
	var a, b []string
	for i := 0; i < 20000; i++ {
		a = append(a, fmt.Sprintf("a%d\n", i))
		b = append(b, fmt.Sprintf("b%d\n", i))
	}
	d := unifiedDiff(a, b)
	if len(d) != 2+1+40000 || d[2] != "@@ -1,20000 +1,20000 @@\n" {
		t.Errorf("%d items, hunk %q", len(d), d[2])
	}
}

func TestNormMode(t *testing.T) {
	for in, want := range map[any]string{644: "0644", "0644": "0644", "00644": "0644", "0o755": "0755", "'600'": "0600", 4755: "4755", "0": "0000"} {
		if got := normMode(in); got != want {
			t.Errorf("normMode(%v) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{"sha256=" + strings.Repeat("A", 64): "sha256", strings.Repeat("a", 32): "md5", strings.Repeat("b", 40): "sha1"} {
		if got, _, err := sourceSum(in); err != nil || got != want {
			t.Errorf("sourceSum(%s) = %s %v", in, got, err)
		}
	}
	if _, _, err := sourceSum("xyz"); err == nil || !strings.HasPrefix(err.Error(), "Source hash xyz format is invalid.") {
		t.Errorf("bad hash: %v", err)
	}
}

// Every file and archive function refuses wrong-typed and missing
// arguments with a failed state, never a panic.
func TestFileModulesBadArgs(t *testing.T) {
	h := newHost(t)
	root := t.TempDir()
	odd := []any{nil, 1, 1.5, true, []any{1, nil}, map[string]any{"x": []any{}}, "", "../x", []byte{0}}
	keys := []string{"source", "contents", "mode", "user", "group", "dir_mode", "file_mode", "makedirs", "backup", "source_hash",
		"pattern", "repl", "count", "flags", "text", "content", "match", "before", "after", "location", "target",
		"recurse", "clean", "require", "__files__", "__dirs__", "__files_missing__", "archive_format", "options", "if_missing"}
	for _, fun := range []string{"file.managed", "file.directory", "file.absent", "file.symlink", "file.replace", "file.line", "file.append", "file.recurse", "archive.extracted"} {
		for _, k := range keys {
			for _, v := range odd {
				name := filepath.Join(root, "x")
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s with %s=%#v panicked: %v", fun, k, v, p)
						}
					}()
					m, _ := Lookup(fun)
					for _, test := range []bool{true, false} {
						m.Run(context.Background(), &Call{Chunk: state.Chunk{"name": name, k: v, "mode": "insert"}, Name: name, Test: test, Host: h})
					}
				}()
			}
		}
	}
	os.RemoveAll(root)
}
