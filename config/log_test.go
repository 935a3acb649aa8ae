package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidLogLevel(t *testing.T) {
	for _, l := range []string{"all", "garbage", "trace", "debug", "profile", "info", "warning", "error", "critical", "quiet", "WARNING", "Debug"} {
		if !ValidLogLevel(l) {
			t.Errorf("ValidLogLevel(%q) got false, want true", l)
		}
	}
	for _, l := range []string{"", "loud", "verbose", "fatal"} {
		if ValidLogLevel(l) {
			t.Errorf("ValidLogLevel(%q) got true, want false", l)
		}
	}
}

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name       string
		level      string
		fileLevel  string
		want       []string // substrings expected in the file
		notWant    []string
		wantNoFile bool
	}{
		{"warning", "warning", "", []string{"[WARNING ] warn msg", "[ERROR   ] error msg"}, []string{"info msg", "debug msg"}, false},
		{"info", "info", "", []string{"[INFO    ] info msg", "[WARNING ] warn msg"}, []string{"debug msg"}, false},
		{"garbage is debug", "garbage", "", []string{"[DEBUG   ] bus debug msg", "info msg"}, nil, false},
		{"critical", "critical", "", nil, []string{"error msg", "warn msg"}, false},
		{"file level", "error", "debug", []string{"debug msg", "error msg"}, nil, false},
		{"quiet", "quiet", "", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "var", "log", "halite", "master")
			log, err := NewLoggerLevels(tt.level, tt.fileLevel, file, false)
			if err != nil {
				t.Fatalf("NewLoggerLevels: %v", err)
			}
			log.Named("bus").Debug("debug msg")
			log.Info("info msg")
			log.Warn("warn msg")
			log.Error("error msg")
			_ = log.Sync()
			data, err := os.ReadFile(file)
			if tt.wantNoFile {
				if !os.IsNotExist(err) {
					t.Fatalf("log file: got %v, want no file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(data), w) {
					t.Errorf("log got %q, want it to contain %q", data, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(string(data), w) {
					t.Errorf("log got %q, want it not to contain %q", data, w)
				}
			}
			st, err := os.Stat(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != 0o600 {
				t.Errorf("log file mode got %v, want 0600", got)
			}
		})
	}
}

func TestNewLoggerErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewLogger("loud", "", true); err == nil || !strings.Contains(err.Error(), `log level "loud"`) {
		t.Errorf("bad level got %v, want a log level error", err)
	}
	if _, err := NewLoggerLevels("info", "shouty", "", true); err == nil || !strings.Contains(err.Error(), `log level "shouty"`) {
		t.Errorf("bad file level got %v, want a log level error", err)
	}
	if _, err := NewLogger("info", "udp://loghost:514", false); err == nil {
		t.Errorf("URI log file got no error, want one")
	}
	if _, err := NewLogger("info", dir, false); err == nil || !strings.Contains(err.Error(), "open log file") {
		t.Errorf("log file that is a directory got %v, want an open error", err)
	}
	log, err := NewLogger("info", "", false)
	if err != nil || log == nil {
		t.Fatalf("no outputs got %v, %v, want a logger", log, err)
	}
	log.Info("goes nowhere")
}
