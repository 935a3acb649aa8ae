package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
)

// DefaultConfigDir is where the programs look for their configuration.
const DefaultConfigDir = "/etc/halite"

// Exit statuses shared by the programs, Salt's (salt/defaults/exitcodes.py).
const (
	// ExitUsage is EX_USAGE, Salt's status for bad command-line use (its
	// OptionParser.error in salt/utils/parsers.py).
	ExitUsage = 64
	// ExitNoTarget is the status salt exits with when it is not given a
	// target and a function (SaltCMDOptionParser in salt/utils/parsers.py).
	ExitNoTarget = 42
)

// UsageError is bad command-line use: the program prints it with its usage
// and exits with status Code, or ExitUsage when Code is 0.
type UsageError struct {
	Msg  string
	Code int
}

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExitError ends a program with a given status after printing nothing more.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Exit returns the process exit status for err, printing it to stderr: 0
// for nil, ExitUsage (or its own code) for a usage error, 2 for a
// configuration error, the code of an ExitError,
// 1 otherwise.
func Exit(prog string, err error, fs *pflag.FlagSet, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ue *UsageError
	var ce *config.Error
	var ee *ExitError
	switch {
	case errors.Is(err, pflag.ErrHelp), errors.Is(err, ErrVersionPrinted):
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
		if ue.Code != 0 {
			return ue.Code
		}
		return ExitUsage
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

// DaemonLogger builds a daemon's logger from its configuration and its
// -l/--log-file flags (which win when set): console at the level, file at
// log_level_logfile (or the level). It returns the log file, nil when there
// is none, for Hangups to reopen.
func DaemonLogger(o config.LogOptions, flagLevel, flagFile string) (*zap.Logger, *config.LogFile, error) {
	if flagLevel != "" {
		if !config.ValidLogLevel(flagLevel) {
			return nil, nil, Usagef("unknown log level %q", flagLevel)
		}
		o.Level = flagLevel
	}
	if flagFile != "" {
		o.File = flagFile
	}
	o.Stderr = true
	log, lf, err := config.OpenLog(o)
	if err != nil {
		return nil, nil, fmt.Errorf("start logging: %w", err)
	}
	return log, lf, nil
}

// Hangups makes SIGHUP harmless for the life of the process (its default
// action kills) and returns the channel it arrives on. Daemons call it
// first thing in main, then OnHangup once they can act on it.
func Hangups() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

// OnHangup starts a goroutine that, for each SIGHUP on ch, reopens the
// log file (after logrotate renamed it) and then calls reload (may be nil).
// stop ends it and returns once it has exited.
func OnHangup(ch <-chan os.Signal, log *zap.Logger, lf *config.LogFile, reload func()) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-ch:
			}
			if lf != nil {
				if err := lf.Reopen(); err != nil {
					log.Error("SIGHUP: log file not reopened, still writing the old one", zap.Error(err))
				}
			}
			log.Info("SIGHUP: log file reopened, reloading")
			if reload != nil {
				reload()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
