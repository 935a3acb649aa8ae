// Command halite-master runs the Halite master: it accepts agents and
// relays over QUIC, publishes their jobs, keeps their returns and serves the
// operator CLIs on its local socket.
//
//	halite-master [-c CONFIG_DIR] [-l LEVEL] [--log-file FILE] [-d] [--pid-file FILE] [-u USER] [--check-config]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/daemon"
	"github.com/halite-fleet/halite/internal/profile"
	"github.com/halite-fleet/halite/internal/version"
	"github.com/halite-fleet/halite/master"
)

type options struct {
	configDir string
	logLevel  string
	logFile   string
	check     bool
	daemon    bool   // -d: run detached
	pidFile   string // --pid-file
	user      string // -u: run as this user
}

func main() { os.Exit(Main()) }

// Main runs the command with os.Args and returns its exit status.
func Main() int {
	hup := cli.Hangups() // before anything: SIGHUP must never kill the master
	fs := pflag.NewFlagSet("halite-master [-c CONFIG_DIR] [-l LEVEL]", pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "configuration directory (reads master and master.d/*.conf)")
	fs.StringVarP(&o.logLevel, "log-level", "l", "", "console log level: garbage, trace, debug, info, warning, error, critical, quiet")
	fs.StringVar(&o.logFile, "log-file", "", "log file (default: the log_file option)")
	fs.BoolVarP(&o.daemon, "daemon", "d", false, "run in the background, detached; return once it is up")
	fs.StringVar(&o.pidFile, "pid-file", "", "write the process id to this file (removed at exit)")
	fs.StringVarP(&o.user, "user", "u", "", "run as this user (root only): its privileges are dropped after the log and pid files are opened")
	vf := cli.AddVersionFlags(fs)
	fs.BoolVar(&o.check, "check-config", false, "read and check the configuration, print its problems with file and line, and exit (0: usable, 2: errors); starts nothing")
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite-master", os.Stdout)
	}
	if err == nil && fs.NArg() > 0 {
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err == nil && o.daemon && !daemon.IsChild() {
		// The child runs the rest; its start's errors come back here.
		err = daemon.Detach(os.Stderr)
		var de *daemon.ExitError
		if errors.As(err, &de) {
			err = &cli.ExitError{Code: de.Code}
		}
		return cli.Exit("halite-master", err, fs, os.Stderr)
	}
	if err == nil {
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, hup, os.Stdout, os.Stderr)
		stop()
	}
	return cli.Exit("halite-master", err, fs, os.Stderr)
}

func run(ctx context.Context, o options, hup <-chan os.Signal, stdout, stderr io.Writer) error {
	cfg, err := config.LoadMaster(o.configDir, cli.WarnTo("halite-master", stderr))
	if err != nil {
		return err
	}
	if o.check {
		fmt.Fprintf(stdout, "halite-master: configuration in %s is usable\n", o.configDir)
		return nil
	}
	log, logFile, err := cli.DaemonLogger(cfg.LogOptions(), o.logLevel, o.logFile)
	if err != nil {
		return err
	}
	defer log.Sync()
	if o.pidFile != "" {
		remove, err := daemon.WritePIDFile(o.pidFile)
		if err != nil {
			return err
		}
		defer remove()
	}
	if o.user != "" {
		if err := daemon.SwitchUser(o.user); err != nil {
			return err
		}
	}
	stopProfile, err := profile.StartCPU()
	if err != nil {
		return err
	}
	defer func() {
		if err := stopProfile(); err != nil {
			log.Error("CPU profile", zap.Error(err))
		}
	}()
	m, err := master.New(cfg, log.Named("master"))
	if err != nil {
		return err
	}
	// salt.cmd runs the agent's modules on the master: the one place the
	// master binary links agent code (the master package does not).
	m.SetLocalCall(exec.LocalCall(m.Name(), version.Version, log.Named("salt.cmd")))
	// The reactor reloads its rules from here on SIGHUP, after a daemon
	// went to /.
	if abs, err := filepath.Abs(o.configDir); err == nil {
		o.configDir = abs
	}
	m.SetConfigDir(o.configDir)
	log.Info("starting", zap.String("version", master.Version), zap.String("config_dir", o.configDir))
	// The reactor rereads its rules on SIGHUP itself (master/reactor.go);
	// the schedule and the engines are reloaded here (master.Reload).
	defer cli.OnHangup(hup, log, logFile, func() {
		c, err := config.LoadMaster(o.configDir, func(config.Warning) {})
		if err == nil {
			err = m.Reload(c)
		}
		if err != nil {
			log.Error("SIGHUP: configuration not reloaded; schedule and engines kept", zap.Error(err))
			return
		}
		log.Info("SIGHUP: schedule and engines reloaded")
	})()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.Ready():
			if err := daemon.Ready(); err != nil {
				log.Error("daemon", zap.Error(err))
			}
		case <-ctx.Done():
		}
	}()
	return m.Run(ctx)
}
