package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
	lvl, ok := zapLevel(level)
	if !ok {
		return nil, fmt.Errorf("log level %q: want one of %s", level, strings.Join(logLevelNames, ", "))
	}
	flvl := lvl
	if fileLevel != "" {
		if flvl, ok = zapLevel(fileLevel); !ok {
			return nil, fmt.Errorf("log level %q: want one of %s", fileLevel, strings.Join(logLevelNames, ", "))
		}
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
	var cores []zapcore.Core
	if file != "" && flvl != quietLevel {
		if strings.Contains(file, "://") {
			return nil, fmt.Errorf("log file %q: URIs are not supported, use a path", file)
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, fmt.Errorf("open log file %s: %w", file, err)
		}
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open log file %s: %w", file, err)
		}
		cores = append(cores, zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(f), flvl))
	}
	if toStderr && lvl != quietLevel {
		cores = append(cores, zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), lvl))
	}
	if len(cores) == 0 {
		return zap.NewNop(), nil
	}
	return zap.New(zapcore.NewTee(cores...), zap.ErrorOutput(zapcore.Lock(os.Stderr))), nil
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
