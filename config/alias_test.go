package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// aliasBomb nests nine aliases per level: levels 9 expand to 9^10 scalars
// (about 3.5 billion) from some 500 bytes.
func aliasBomb(key string) string {
	var b strings.Builder
	b.WriteString(key + ":\n  l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 9; i++ {
		p := "*l" + string(rune('0'+i-1))
		b.WriteString("  l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(p+", ", 8) + p + "]\n")
	}
	return b.String()
}

// TestAliasBomb: a configuration file holding an alias bomb (master,
// drop-in, agent) is refused at once with its file and the line of the
// alias that crosses the bound, instead of growing the process until it is
// killed.
func TestAliasBomb(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		agent bool
		want  string
	}{
		{"master", map[string]string{"master": "port: 4506\n" + aliasBomb("nodegroups")}, false,
			"D/master:8: invalid YAML: aliases expand past 100000 nodes (alias *l4)"},
		{"unknown option in a drop-in", map[string]string{"master": "port: 4506\n", "master.d/x.conf": aliasBomb("whatever")}, false,
			"D/master.d/x.conf:7: invalid YAML: aliases expand past 100000 nodes (alias *l4)"},
		{"agent grains", map[string]string{"agent": "id: a\n" + aliasBomb("grains")}, true,
			"D/agent:8: invalid YAML: aliases expand past 100000 nodes (alias *l4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			start := time.Now()
			var err error
			if tt.agent {
				_, err = LoadAgent(dir, nil)
			} else {
				_, err = LoadMaster(dir, nil)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("load took %v, want well under 2s", d)
			}
			var cerr *Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %T %v, want *config.Error", err, err)
			}
			if got := strings.ReplaceAll(err.Error(), dir, "D"); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
