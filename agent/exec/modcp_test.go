package exec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/agent/grains"
)

// TestCPLocal: cp.* on an agent without a master (Salt's file_client:
// local, salt/fileclient.py FSClient) reads its own file_roots: the first
// root holding a path wins, saltenvs, Salt's return shapes (salt/modules/cp.py:
// "" for a missing file, False for a missing dest folder), and no path or
// symlink leads out of a root.
func TestCPLocal(t *testing.T) {
	first, second, outside, out := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	for root, files := range map[string]map[string]string{
		first:   {"conf/a": "first\n", "top.sls": "base: {}\n"},
		second:  {"conf/a": "second\n", "conf/sub/b": "b\n", "web/init.sls": "x: {}\n"},
		outside: {"secret": "s3cret\n"},
	} {
		for name, body := range files {
			p := filepath.Join(root, filepath.FromSlash(name))
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.MkdirAll(filepath.Join(second, "conf", "empty"), 0o755)
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(first, "conf", "leak")); err != nil {
		t.Fatal(err)
	}
	e := New(Options{ID: "loc", Grains: grains.NewSkipped(), Opts: map[string]any{
		"cachedir":   filepath.Join(out, "cache"),
		"file_roots": map[string]any{"base": []any{first, second}},
	}})
	run := func(fun string, args ...any) any {
		t.Helper()
		return e.Run(context.Background(), Request{Fun: fun, Args: args}).Return
	}
	for _, tc := range []struct {
		fun  string
		args []any
		want any
	}{
		{"cp.list_master", nil, []any{"conf/a", "conf/sub/b", "top.sls", "web/init.sls"}},
		{"cp.list_master", []any{"base", "conf/s"}, []any{"conf/sub/b"}},
		{"cp.list_master_dirs", nil, []any{"conf", "conf/empty", "conf/sub", "web"}},
		{"cp.list_states", nil, []any{"top", "web"}},
		{"cp.get_file", []any{"salt://nope", filepath.Join(out, "x")}, ""},
		{"cp.get_file", []any{"salt://conf/a", filepath.Join(out, "no", "x")}, false},
		{"cp.cache_file", []any{"salt://nope"}, false},
		{"cp.hash_file", []any{"salt://nope"}, ""},
		{"cp.hash_file", []any{"salt://conf/a"}, map[string]any{"hash_type": "sha256", "hsum": sha256Hex("first\n")}},
		{"cp.hash_file", []any{filepath.Join(second, "conf/sub/b")}, map[string]any{"hash_type": "sha256", "hsum": sha256Hex("b\n")}},
	} {
		got := run(tc.fun, tc.args...)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %v = %#v, want %#v", tc.fun, tc.args, got, tc.want)
		}
	}
	dest := filepath.Join(out, "a")
	if got := run("cp.get_file", "salt://conf/a", out+"/"); got != dest {
		t.Fatalf("cp.get_file into a folder = %v, want %s", got, dest)
	}
	if b, _ := os.ReadFile(dest); string(b) != "first\n" {
		t.Errorf("got %q, want the first root's file", b)
	}
	got := run("cp.get_dir", "salt://conf/", filepath.Join(out, "d"))
	want := []any{filepath.Join(out, "d", "conf", "a"), filepath.Join(out, "d", "conf", "empty"), filepath.Join(out, "d", "conf", "sub", "b")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cp.get_dir = %v, want %v", got, want)
	}
	cached := run("cp.cache_file", "salt://conf/sub/b")
	if cached != filepath.Join(out, "cache", "files", "base", "conf", "sub", "b") {
		t.Errorf("cp.cache_file = %v", cached)
	}
	if got := run("cp.is_cached", "salt://conf/sub/b"); got != cached {
		t.Errorf("cp.is_cached = %v, want %v", got, cached)
	}
	for _, bad := range []string{"salt://../etc/passwd", "salt://conf/../../x", "salt:///etc/passwd"} {
		if got := run("cp.get_file", bad, filepath.Join(out, "bad")); !strings.Contains(toStr(got), "refused") {
			t.Errorf("cp.get_file %s = %v, want refused", bad, got)
		}
	}
	// A symlink leading out of its root is neither listed nor served.
	if got := run("cp.get_file", "salt://conf/leak", filepath.Join(out, "leak")); got != "" {
		t.Errorf("cp.get_file of a symlink out of the root = %v, want \"\"", got)
	}
	if _, err := os.Stat(filepath.Join(out, "leak")); !os.IsNotExist(err) {
		t.Errorf("the secret was copied (%v)", err)
	}
	got = run("cp.get_template", "salt://conf/a", filepath.Join(out, "t"))
	switch {
	case localTemplate == nil && !strings.Contains(toStr(got), "-tags reactor"):
		t.Errorf("cp.get_template without Jinja = %v, want an error naming the build", got)
	case localTemplate != nil:
		// -tags reactor: rendered here.
		if b, _ := os.ReadFile(filepath.Join(out, "t")); got != filepath.Join(out, "t") || string(b) != "first\n" {
			t.Errorf("cp.get_template = %v (%q)", got, b)
		}
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func toStr(v any) string {
	s, _ := v.(string)
	return s
}
