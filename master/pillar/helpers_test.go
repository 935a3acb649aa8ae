package pillar

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

// tree writes files (path -> contents) under a new directory.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, files)
	return dir
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newTest is a Compiler over o with base at dir when o has no roots, the
// grains of grains, and lookups not cached.
func newTest(t *testing.T, o Options, grains map[string]map[string]any) *Compiler {
	t.Helper()
	if o.Log == nil {
		o.Log = zaptest.NewLogger(t)
	}
	if o.Grains == nil {
		o.Grains = func(id string) map[string]any { return grains[id] }
	}
	if o.LookupTTL == 0 {
		o.LookupTTL = -1
	}
	return New(o)
}

func mustFor(t *testing.T, c *Compiler, id string) map[string]any {
	t.Helper()
	p, err := c.For(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdirWrite(full, s string) error {
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, []byte(s), 0o644)
}
