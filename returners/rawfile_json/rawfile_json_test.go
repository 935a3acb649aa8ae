package rawfile_json

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "events")
	r, err := returners.Open(rettest.Ctx(t), "rawfile_json", returners.RoleEvent, returners.Config{Opts: map[string]any{"rawfile_json.filename": path}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Returner(rettest.Ctx(t), rettest.Ret("20260101000000000000", "web1", "test.ping", true)); err != nil {
		t.Fatal(err)
	}
	rettest.Events(t, r.(returners.EventReturner), 10, 4)
	if err := r.Returner(rettest.Ctx(t), map[string]any{"bad": func() {}}); !returners.IsPermanent(err) {
		t.Fatalf("a return JSON cannot hold: got %v, want a Permanent error", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	s := bufio.NewScanner(f)
	for s.Scan() {
		var m map[string]any
		if err := json.Unmarshal(s.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", s.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 11 || lines[0]["id"] != "web1" || lines[10]["tag"] != "halite/test/9" {
		t.Fatalf("got %d lines (first %v, last %v), want 11: the return, then 10 events", len(lines), lines[0], lines[len(lines)-1])
	}
}
