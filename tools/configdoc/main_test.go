package main

import (
	"os"
	"strings"
	"testing"
)

// TestConfigDocUpToDate regenerates docs/CONFIG.md from the option tables
// and fails when the file in the repository differs.
func TestConfigDocUpToDate(t *testing.T) {
	var b strings.Builder
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../docs/CONFIG.md")
	if err != nil {
		t.Fatalf("%v (run: go run ./tools/configdoc > docs/CONFIG.md)", err)
	}
	if string(have) != b.String() {
		t.Errorf("docs/CONFIG.md is not what the option tables say; run: go run ./tools/configdoc > docs/CONFIG.md")
	}
	for _, want := range []string{"| `ret_port` |", "| `master_port` |", "| `batch_max` |", "| `reactor_refresh_interval` |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("generated doc lacks %s", want)
		}
	}
}
