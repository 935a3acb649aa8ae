package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
)

// A masterless agent's rawfile_json gets the return; while its file cannot
// be written the return waits in the spool, and a later run delivers it.
func TestReturnersSpoolAndDeliver(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	os.WriteFile(blocker, nil, 0o600)
	cfg := &config.Agent{ID: "dev1", CacheDir: filepath.Join(dir, "cache"), Return: []string{"rawfile_json"},
		Raw: map[string]any{"rawfile_json.filename": filepath.Join(blocker, "x.json")}}
	log := zaptest.NewLogger(t)
	ctx := context.Background()

	rs, err := OpenReturners(ctx, cfg, "call", log)
	if err != nil {
		t.Fatal(err)
	}
	rs.Return("20260101000000000001", "test.echo", []any{"hi"}, exec.Result{Return: "hi", Success: true})
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ok := rs.Drain(dctx)
	cancel()
	rs.Close()
	if ok {
		t.Fatal("Drain with an unwritable file: got true, want false (the return kept)")
	}

	out := filepath.Join(dir, "returns.json")
	cfg.Raw["rawfile_json.filename"] = out
	rs, err = OpenReturners(ctx, cfg, "call", log)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	ok = rs.Drain(dctx)
	cancel()
	rs.Close()
	if !ok {
		t.Fatal("Drain after the file became writable: got false, want true")
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1: %s", len(lines), b)
	}
	var ret map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &ret); err != nil || ret["id"] != "dev1" || ret["return"] != "hi" || ret["fun"] != "test.echo" {
		t.Fatalf("line %s (%v): want id dev1, fun test.echo, return hi", lines[0], err)
	}
}

func TestReturnersUnknownName(t *testing.T) {
	cfg := &config.Agent{ID: "dev1", CacheDir: t.TempDir(), Return: []string{"rawfile_json,nosuch"}, Raw: map[string]any{}}
	_, err := OpenReturners(context.Background(), cfg, "", zaptest.NewLogger(t))
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("return: rawfile_json,nosuch: got %v, want an error naming nosuch", err)
	}
}
