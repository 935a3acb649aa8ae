package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// logLevelNames are Salt's log levels, most verbose first.
var logLevelNames = []string{"all", "garbage", "trace", "debug", "profile", "info", "warning", "error", "critical", "quiet"}

// quietLevel enables nothing.
const quietLevel = zapcore.FatalLevel + 1

// zapLevel maps a Salt level to zap's. zap has nothing below debug, so
// all, garbage, trace and profile log as much as debug; critical keeps only
// messages above error.
func zapLevel(s string) (zapcore.Level, bool) {
	switch strings.ToLower(s) {
	case "all", "garbage", "trace", "debug", "profile":
		return zapcore.DebugLevel, true
	case "info":
		return zapcore.InfoLevel, true
	case "warning", "warn":
		return zapcore.WarnLevel, true
	case "error":
		return zapcore.ErrorLevel, true
	case "critical":
		return zapcore.DPanicLevel, true
	case "quiet":
		return quietLevel, true
	}
	return 0, false
}

// ValidLogLevel reports whether s is one of Salt's log levels (all, garbage,
// trace, debug, profile, info, warning, error, critical, quiet; any case).
func ValidLogLevel(s string) bool {
	_, ok := zapLevel(s)
	return ok
}

// LogOptions say where and how a daemon logs: Salt's log_level,
// log_level_logfile, log_file, log_rotate_max_bytes and
// log_rotate_backup_count, and Halite's log_format.
type LogOptions struct {
	Level     string // console level, and the file's when FileLevel is ""
	FileLevel string
	File      string // "" logs to no file
	Stderr    bool   // also log to stderr at Level
	// Format is "text" (Salt's layout, the default) or "json" (one object
	// a line, for log shippers), for the file and stderr alike.
	Format string
	// MaxBytes and Backups rotate the file by size, as Salt's
	// RotatingFileHandler does: when a line would take the file to
	// MaxBytes, file.N-1 becomes file.N, …, file becomes file.1 and a new
	// file starts; file.Backups is the oldest kept. As in Python's
	// handler, rotation needs both above 0 (salt/_logging/impl.py).
	MaxBytes int64
	Backups  int
}

// NewLogger builds the daemons' logger: to file (appended, created 0600 with
// its directory, left open for the life of the process) unless file is
// empty, and to stderr when toStderr, both at level, a Salt log level.
// Level names in the output are Salt's (DEBUG, INFO, WARNING, ERROR,
// CRITICAL). A bad level, a log_file URI or a file that cannot be opened is
// an error.
func NewLogger(level, file string, toStderr bool) (*zap.Logger, error) {
	return NewLoggerLevels(level, level, file, toStderr)
}

// NewLoggerLevels is NewLogger with a separate level for the file (Salt's
// log_level_logfile); an empty fileLevel means level.
func NewLoggerLevels(level, fileLevel, file string, toStderr bool) (*zap.Logger, error) {
	log, _, err := OpenLog(LogOptions{Level: level, FileLevel: fileLevel, File: file, Stderr: toStderr})
	return log, err
}

// OpenLog builds a daemon's logger from o, and returns its log file (nil
// when it logs to none) for the daemon to Reopen on SIGHUP.
func OpenLog(o LogOptions) (*zap.Logger, *LogFile, error) {
	lvl, ok := zapLevel(o.Level)
	if !ok {
		return nil, nil, fmt.Errorf("log level %q: want one of %s", o.Level, strings.Join(logLevelNames, ", "))
	}
	flvl := lvl
	if o.FileLevel != "" {
		if flvl, ok = zapLevel(o.FileLevel); !ok {
			return nil, nil, fmt.Errorf("log level %q: want one of %s", o.FileLevel, strings.Join(logLevelNames, ", "))
		}
	}
	if o.MaxBytes < 0 || o.Backups < 0 {
		return nil, nil, fmt.Errorf("log rotation: max bytes %d and backup count %d must not be negative", o.MaxBytes, o.Backups)
	}
	enc := zapcore.EncoderConfig{
		TimeKey:          "time",
		LevelKey:         "level",
		NameKey:          "logger",
		MessageKey:       "msg",
		StacktraceKey:    "stacktrace",
		LineEnding:       zapcore.DefaultLineEnding,
		EncodeLevel:      saltLevelEncoder,
		EncodeTime:       zapcore.TimeEncoderOfLayout("2006-01-02 15:04:05.000"),
		EncodeDuration:   zapcore.StringDurationEncoder,
		EncodeName:       zapcore.FullNameEncoder,
		ConsoleSeparator: " ",
	}
	var newEnc func() zapcore.Encoder
	switch o.Format {
	case "", "text":
		newEnc = func() zapcore.Encoder { return zapcore.NewConsoleEncoder(enc) }
	case "json":
		enc.EncodeLevel = saltLevelNameEncoder
		enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		enc.EncodeDuration = zapcore.SecondsDurationEncoder
		newEnc = func() zapcore.Encoder { return zapcore.NewJSONEncoder(enc) }
	default:
		return nil, nil, fmt.Errorf("log format %q: want text or json", o.Format)
	}
	var cores []zapcore.Core
	var lf *LogFile
	if o.File != "" && flvl != quietLevel {
		if strings.Contains(o.File, "://") {
			return nil, nil, fmt.Errorf("log file %q: URIs are not supported, use a path", o.File)
		}
		if err := os.MkdirAll(filepath.Dir(o.File), 0o755); err != nil {
			return nil, nil, fmt.Errorf("open log file %s: %w", o.File, err)
		}
		lf = &LogFile{path: o.File}
		if o.MaxBytes > 0 && o.Backups > 0 {
			lf.max, lf.backups = o.MaxBytes, o.Backups
		}
		if err := lf.Reopen(); err != nil {
			return nil, nil, err
		}
		cores = append(cores, zapcore.NewCore(newEnc(), lf, flvl))
	}
	if o.Stderr && lvl != quietLevel {
		cores = append(cores, zapcore.NewCore(newEnc(), zapcore.Lock(os.Stderr), lvl))
	}
	if len(cores) == 0 {
		return zap.NewNop(), nil, nil
	}
	return zap.New(zapcore.NewTee(cores...), zap.ErrorOutput(zapcore.Lock(os.Stderr))), lf, nil
}

// LogFile is a daemon's log file: appended to, rotated by size when asked,
// and reopened by Reopen after logrotate renamed it. Safe for concurrent
// use.
type LogFile struct {
	path    string
	max     int64 // 0: never rotate
	backups int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Reopen closes the log file and opens path again (creating it 0600), so
// that after logrotate renamed the file the daemon writes a new one. On
// error the old file stays in use.
func (l *LogFile) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reopen()
}

func (l *LogFile) reopen() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open log file %s: %w", l.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("open log file %s: %w", l.path, err)
	}
	if l.f != nil {
		l.f.Close()
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Write writes one log entry, rotating first when it would take the file
// to the size limit. A failed rotation keeps writing to the current file.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max > 0 && l.size > 0 && l.size+int64(len(p)) >= l.max {
		l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts file.N-1 to file.N … file to file.1 and opens a new file,
// as Python's RotatingFileHandler.doRollover does.
func (l *LogFile) rotate() {
	for i := l.backups - 1; i > 0; i-- {
		src := fmt.Sprintf("%s.%d", l.path, i)
		if _, err := os.Stat(src); err == nil {
			os.Rename(src, fmt.Sprintf("%s.%d", l.path, i+1))
		}
	}
	if os.Rename(l.path, l.path+".1") == nil {
		l.reopen()
	}
}

// Sync flushes the file to disk.
func (l *LogFile) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Sync()
}

// Close closes the file; later writes fail.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

// saltLevelNameEncoder writes Salt's level names in lower case, for JSON.
func saltLevelNameEncoder(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	switch l {
	case zapcore.DebugLevel:
		enc.AppendString("debug")
	case zapcore.InfoLevel:
		enc.AppendString("info")
	case zapcore.WarnLevel:
		enc.AppendString("warning")
	case zapcore.ErrorLevel:
		enc.AppendString("error")
	default:
		enc.AppendString("critical")
	}
}

// saltLevelEncoder writes Salt's level names.
func saltLevelEncoder(l zapcore.Level, enc zapcore.PrimitiveArrayEncoder) {
	switch l {
	case zapcore.DebugLevel:
		enc.AppendString("[DEBUG   ]")
	case zapcore.InfoLevel:
		enc.AppendString("[INFO    ]")
	case zapcore.WarnLevel:
		enc.AppendString("[WARNING ]")
	case zapcore.ErrorLevel:
		enc.AppendString("[ERROR   ]")
	default:
		enc.AppendString("[CRITICAL]")
	}
}

// LogOptions returns the agent's logging options (Stderr false).
func (a *Agent) LogOptions() LogOptions {
	return LogOptions{Level: a.LogLevel, FileLevel: a.LogLevelLogfile, File: a.LogFile, Format: a.LogFormat,
		MaxBytes: int64(a.LogRotateMaxBytes), Backups: a.LogRotateBackupCount}
}

// LogOptions returns the master's logging options (Stderr false).
func (m *Master) LogOptions() LogOptions {
	return LogOptions{Level: m.LogLevel, FileLevel: m.LogLevelLogfile, File: m.LogFile, Format: m.LogFormat,
		MaxBytes: int64(m.LogRotateMaxBytes), Backups: m.LogRotateBackupCount}
}
