package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// names lists dir.
func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, want := range []string{"first", "second, longer", ""} {
		if err := Write(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("after Write(%q): got %q, %v", want, got, err)
		}
		if got := names(t, dir); len(got) != 1 {
			t.Errorf("after Write(%q): files %v, want f alone (no temporary file left)", want, got)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := Write(filepath.Join(t.TempDir(), "no", "such", "dir"), nil, 0o600); err == nil {
		t.Errorf("Write into a missing folder: no error")
	}
}

// TestWriteLongName: a file whose name is as long as the file system
// allows (255 bytes) is written; a temporary name made from it (NAME.tmp)
// was too long.
func TestWriteLongName(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
	}{
		{strings.Repeat("n", 255), 0o755},
		{strings.Repeat("m", 251) + ".sh", 0o644},
	} {
		path := filepath.Join(dir, tc.name)
		if err := Write(path, []byte("data"), tc.mode); err != nil {
			t.Fatalf("Write of a %d-byte name: %v", len(tc.name), err)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != tc.mode {
			t.Errorf("%d-byte name: stat %v, %v; want mode %v", len(tc.name), fi, err, tc.mode)
		}
	}
	if got := names(t, dir); len(got) != 2 {
		t.Errorf("files %v, want the two written alone", got)
	}
}
