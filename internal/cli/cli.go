package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/yamlbound"
)

// DefaultConfigDir is where the programs look for their configuration.
const DefaultConfigDir = "/etc/halite"

// UsageError is bad command-line use: the program prints it with its usage
// and exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExitError ends a program with a given status after printing nothing more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Exit returns the process exit status for err, printing it to stderr: 0
// for nil, 2 for a usage or configuration error, the code of an ExitError,
// 1 otherwise.
func Exit(prog string, err error, fs *pflag.FlagSet, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue *UsageError
	var ce *config.Error
	var ee *ExitError
	switch {
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\n", prog, ue.Msg)
		if fs != nil {
			fmt.Fprintf(stderr, "Usage: %s\n", fs.Name())
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return 2
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "%s: configuration error: %s\n", prog, ce.Error())
		return 2
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, err)
	return 1
}

// ParseFlags parses args with fs, turning flag errors into usage errors.
func ParseFlags(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fmt.Fprintf(os.Stdout, "Usage: %s\n", fs.Name())
			fs.PrintDefaults()
			return err
		}
		return &UsageError{Msg: err.Error()}
	}
	return nil
}

// SignalContext is a context cancelled by SIGINT or SIGTERM.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// WarnTo returns a config warning printer writing to w.
func WarnTo(prog string, w io.Writer) func(config.Warning) {
	return func(wn config.Warning) { fmt.Fprintf(w, "%s: warning: %s\n", prog, wn.String()) }
}

// ParseFunArgs turns the words after a function name into positional
// arguments and keyword arguments, as Salt's CLI does: "key=value" is a
// keyword argument when key is an identifier, and every value is read as
// YAML, so "3" is a number, "true" a boolean, "[1, 2]" a list and
// "{a: 1}" a dictionary; a word that is not valid YAML stays a string.
func ParseFunArgs(words []string) (args []any, kwargs map[string]any) {
	args = []any{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok && isIdent(k) {
			if kwargs == nil {
				kwargs = map[string]any{}
			}
			kwargs[k] = YAMLValue(v)
			continue
		}
		args = append(args, YAMLValue(w))
	}
	return args, kwargs
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// YAMLValue reads s as a YAML scalar or flow collection, as Salt's
// yamlify_arg does; what does not parse, or parses to something other than
// a scalar, list or dictionary, stays the string s.
func YAMLValue(s string) any {
	if s == "" {
		return s
	}
	var v any
	if err := yamlbound.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	switch v.(type) {
	case nil:
		if s == "null" || s == "~" || s == "None" {
			return nil
		}
		return s
	case string:
		if s == "None" {
			return nil // Salt reads None as Python's None
		}
		return s // keep the user's exact text (quotes, spacing)
	case float64:
		if !strings.ContainsAny(s, ".eE") {
			return s // an integer too large to hold exactly, such as a jid
		}
		return v
	case bool, int, int64, uint64:
		return v
	case []any, map[string]any, map[any]any:
		if strings.ContainsAny(s[:1], "[{") {
			return Normalize(v)
		}
	}
	return s
}

// Normalize converts maps with non-string keys, as YAML decoding may make,
// into map[string]any, recursively, so that every value encodes as CBOR.
func Normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = Normalize(x)
		}
		return v
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprint(k)] = Normalize(x)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = Normalize(x)
		}
		return v
	}
	return v
}

// DaemonLogger builds a daemon's logger from its configuration and its
// -l/--log-file flags (which win when set): console at the level, file at
// log_level_logfile (or the level).
func DaemonLogger(cfgLevel, cfgFileLevel, cfgFile, flagLevel, flagFile string) (*zap.Logger, error) {
	level := cfgLevel
	if flagLevel != "" {
		if !config.ValidLogLevel(flagLevel) {
			return nil, Usagef("unknown log level %q", flagLevel)
		}
		level = flagLevel
	}
	file := cfgFile
	if flagFile != "" {
		file = flagFile
	}
	log, err := config.NewLoggerLevels(level, cfgFileLevel, file, true)
	if err != nil {
		return nil, fmt.Errorf("start logging: %w", err)
	}
	return log, nil
}
