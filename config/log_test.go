package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
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

// TestLogRotation: the file rotates by size as Python's
// RotatingFileHandler does for Salt (salt/_logging/impl.py picks it when
// log_rotate_max_bytes > 0): file.1 is the newest backup, file.N the
// oldest kept, and with no backups (Python: "if either of maxBytes or
// backupCount is zero, rollover never occurs") the file just grows.
func TestLogRotation(t *testing.T) {
	tests := []struct {
		name        string
		max         int64
		backups     int
		lines       int
		wantFiles   []string // present
		wantMissing []string
	}{
		{"three backups", 400, 3, 40, []string{"", ".1", ".2", ".3"}, []string{".4"}},
		{"one backup", 400, 1, 40, []string{"", ".1"}, []string{".2"}},
		{"no backups never rotates", 400, 0, 40, []string{""}, []string{".1"}},
		{"under the limit", 1 << 20, 3, 40, []string{""}, []string{".1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "agent")
			log, _, err := OpenLog(LogOptions{Level: "info", File: file, MaxBytes: tt.max, Backups: tt.backups})
			if err != nil {
				t.Fatalf("OpenLog: %v", err)
			}
			for i := range tt.lines {
				log.Info("line", zap.Int("n", i))
			}
			for _, sfx := range tt.wantFiles {
				st, err := os.Stat(file + sfx)
				if err != nil {
					t.Errorf("file%s: got %v, want it", sfx, err)
					continue
				}
				rotating := tt.backups > 0 && tt.max < 1<<20
				if rotating && st.Size() >= tt.max {
					t.Errorf("file%s: got %d bytes, want under %d", sfx, st.Size(), tt.max)
				}
				if got := st.Mode().Perm(); got != 0o600 {
					t.Errorf("file%s mode: got %v, want 0600", sfx, got)
				}
			}
			for _, sfx := range tt.wantMissing {
				if _, err := os.Stat(file + sfx); !os.IsNotExist(err) {
					t.Errorf("file%s: got %v, want no such file", sfx, err)
				}
			}
			// The newest line is in the file, the one before it in file.1.
			data, _ := os.ReadFile(file)
			if want := fmt.Sprintf(`{"n": %d}`, tt.lines-1); !strings.Contains(string(data), want) {
				t.Errorf("file: got %q, want the last line %s", data, want)
			}
			if tt.backups > 0 && tt.max < 1<<20 {
				old, _ := os.ReadFile(file + ".1")
				if strings.Contains(string(old), fmt.Sprintf(`{"n": %d}`, tt.lines-1)) || len(old) == 0 {
					t.Errorf("file.1: got %q, want older lines only", old)
				}
			}
		})
	}
}

// TestLogReopen: logrotate renames the file, then Reopen (on SIGHUP) makes
// a new one; nothing written is lost.
func TestLogReopen(t *testing.T) {
	file := filepath.Join(t.TempDir(), "master")
	log, lf, err := OpenLog(LogOptions{Level: "info", File: file})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	log.Info("before rotation")
	if err := os.Rename(file, file+".1"); err != nil {
		t.Fatal(err)
	}
	log.Info("after rename")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("before Reopen: got %v, want no new file yet", err)
	}
	if err := lf.Reopen(); err != nil {
		t.Fatalf("Reopen: %v", err)
	}
	log.Info("after reopen")
	old, _ := os.ReadFile(file + ".1")
	cur, _ := os.ReadFile(file)
	for _, c := range []struct {
		data, want, notWant string
	}{
		{string(old), "before rotation", "after reopen"},
		{string(old), "after rename", "after reopen"},
		{string(cur), "after reopen", "before rotation"},
	} {
		if !strings.Contains(c.data, c.want) || strings.Contains(c.data, c.notWant) {
			t.Errorf("got %q, want %q in it and not %q", c.data, c.want, c.notWant)
		}
	}
	// A file that cannot be opened any more keeps the old one in use.
	if err := os.Rename(file, file+".2"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(file, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := lf.Reopen(); err == nil {
		t.Errorf("Reopen onto a directory: got nil, want an error")
	}
	log.Info("still logging")
	if old, _ := os.ReadFile(file + ".2"); !strings.Contains(string(old), "still logging") {
		t.Errorf("after a failed Reopen: got %q, want the old file still written", old)
	}
}

// TestLogJSON: log_format json writes one JSON object a line with Salt's
// level names.
func TestLogJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "agent")
	log, _, err := OpenLog(LogOptions{Level: "info", File: file, Format: "json"})
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	log.Named("agent").Warn("master unreachable", zap.String("addr", "10.0.0.1:4506"))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("log line %q is not JSON: %v", data, err)
	}
	want := map[string]any{"level": "warning", "logger": "agent", "msg": "master unreachable", "addr": "10.0.0.1:4506"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(got["time"])); err != nil {
		t.Errorf("time: got %v, want RFC 3339: %v", got["time"], err)
	}
}

func TestOpenLogErrors(t *testing.T) {
	for _, o := range []LogOptions{
		{Level: "info", Format: "xml"},
		{Level: "info", MaxBytes: -1, Backups: 1},
		{Level: "info", MaxBytes: 10, Backups: -3},
	} {
		if _, _, err := OpenLog(o); err == nil {
			t.Errorf("OpenLog(%+v): got nil, want an error", o)
		}
	}
}

// TestLogOptionsLoad: the logging options load for both roles, and bad
// values are errors.
func TestLogOptionsLoad(t *testing.T) {
	conf := "log_file: /var/log/x\nlog_format: json\nlog_rotate_max_bytes: 1048576\nlog_rotate_backup_count: 5\n"
	want := LogOptions{Level: "warning", File: "/var/log/x", Format: "json", MaxBytes: 1 << 20, Backups: 5}
	a, err := LoadAgent(writeDir(t, map[string]string{"agent": conf}), nil)
	if err != nil {
		t.Fatalf("LoadAgent: %v", err)
	}
	if got := a.LogOptions(); got != want {
		t.Errorf("agent LogOptions: got %+v, want %+v", got, want)
	}
	m, err := LoadMaster(writeDir(t, map[string]string{"master": conf}), nil)
	if err != nil {
		t.Fatalf("LoadMaster: %v", err)
	}
	if got := m.LogOptions(); got != want {
		t.Errorf("master LogOptions: got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"log_format: xml\n", "log_rotate_max_bytes: -1\n", "log_rotate_backup_count: many\n"} {
		if _, err := LoadAgent(writeDir(t, map[string]string{"agent": bad}), nil); err == nil {
			t.Errorf("agent %q: got nil, want an error", bad)
		}
	}
}
