package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRewriteFile(t *testing.T) {
	tests := []struct {
		name, pkg, in, want string
		logs, qlogs         int
	}{{
		name: "debug guard and log statements",
		pkg:  "ackhandler",
		in: `func f(h *h) {
	if h.logger.Debug() {
		h.logger.Debugf("x %d", 1)
	}
	h.logger.Infof("y")
	utils.DefaultLogger.Errorf("z")
	err := fmt.Errorf("kept")
	_ = err
}`,
		want: `func f(h *h) {
	if protocol.LogEnabled && h.logger.Debug() {
		h.logger.Debugf("x %d", 1)
	}
	if protocol.LogEnabled {
		h.logger.Infof("y")
	}
	if protocol.LogEnabled {
		utils.DefaultLogger.Errorf("z")
	}
	err := fmt.Errorf("kept")
	_ = err
}`,
		logs: 3,
	}, {
		name: "debug in a larger condition",
		pkg:  "quic",
		in: `func f(c *c) {
	if c.logger.Debug() && n > 1 {
		c.logger.Debugf("x")
	}
}`,
		want: `func f(c *c) {
	if (protocol.LogEnabled && c.logger.Debug()) && n > 1 {
		if protocol.LogEnabled {
			c.logger.Debugf("x")
		}
	}
}`,
		logs: 2,
	}, {
		name: "qlog nil tests",
		pkg:  "quic",
		in: `func f(c *c, config *Config) {
	if c.qlogger != nil {
		c.qlogger.RecordEvent(e)
	}
	if c.qlogger == nil || x {
		return
	}
	if config.Tracer != nil && qlogTrace != nil {
	}
	if tracer == nil || c.other != nil {
	}
}`,
		want: `func f(c *c, config *Config) {
	if protocol.QlogEnabled && c.qlogger != nil {
		c.qlogger.RecordEvent(e)
	}
	if (!protocol.QlogEnabled || c.qlogger == nil) || x {
		return
	}
	if (protocol.QlogEnabled && config.Tracer != nil) && (protocol.QlogEnabled && qlogTrace != nil) {
	}
	if tracer == nil || c.other != nil {
	}
}`,
		qlogs: 4,
	}, {
		name: "inside package protocol",
		pkg:  "protocol",
		in: `func f(l logger) {
	l.logger.Debugf("x")
}`,
		want: `func f(l logger) {
	if LogEnabled {
		l.logger.Debugf("x")
	}
}`,
		logs: 1,
	}, {
		name: "nothing to do",
		pkg:  "quic",
		in: `func f() error {
	t.Errorf("not a logger")
	return fmt.Errorf("x")
}`,
		want: `func f() error {
	t.Errorf("not a logger")
	return fmt.Errorf("x")
}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.go")
			if err := os.WriteFile(path, []byte("package "+tt.pkg+"\n\n"+tt.in+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			n, err := rewriteFile(path)
			if err != nil {
				t.Fatalf("rewriteFile: %v", err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			want := tt.want
			if tt.pkg != "protocol" && (tt.logs > 0 || tt.qlogs > 0) {
				if !strings.Contains(got, `import "github.com/quic-go/quic-go/internal/protocol"`) {
					t.Errorf("no import of protocol in\n%s", got)
				}
			}
			if !strings.Contains(got, want) {
				t.Errorf("got\n%s\nwant it to contain\n%s", got, want)
			}
			if n.logs != tt.logs || n.qlogs != tt.qlogs {
				t.Errorf("got %d logging and %d qlog sites, want %d and %d", n.logs, n.qlogs, tt.logs, tt.qlogs)
			}
		})
	}
}
