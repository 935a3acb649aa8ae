// Command halite-agent runs the Halite agent on a device: it connects to its
// master, runs the master's jobs and sends back their returns. It is one
// static binary, cross-compiled for every architecture the fleet has, and
// a multi-call one: it is also the caller (package internal/callcmd), run
// as "halite-agent call …" or under the name halite-call (a symlink to
// halite-agent on devices), so a device carries one file, not two.
//
//	halite-agent [-c CONFIG_DIR] [-l LEVEL] [--log-file FILE] [-d] [--pid-file FILE] [-u USER] [--check-config]
//	halite-agent call [-c CONFIG_DIR] [--local] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]
//	halite-call ...  (argv[0] halite-call: the same as halite-agent call ...)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/agent/ota"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/callcmd"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/daemon"
)

type options struct {
	configDir string
	logLevel  string
	logFile   string
	daemon    bool   // -d: run detached
	pidFile   string // --pid-file
	user      string // -u: run as this user
	id        string
	finger    bool
	check     bool
}

func main() { os.Exit(Main()) }

// otaMode is how agent/ota started this process: ota.ModeTrial (a build on
// trial, its watchdog the old build), ota.ModeRestart (exec'd by the
// watchdog), or "".
var otaMode = ota.Mode()

// breakConfig is nil but in the build with -tags halite_unreachable
// (unreachable.go), a build that cannot reach its master, which the e2e
// tests install over the air to see it rolled back.
var breakConfig func(*config.Agent)

// Main runs the command with os.Args and returns its exit status: the
// caller's when started as halite-call or as "halite-agent call".
func Main() int {
	if args, ok := callerArgs(os.Args); ok {
		return callcmd.Main(args, os.Stdout, os.Stderr)
	}
	hup := cli.Hangups() // before anything: SIGHUP must never kill the agent
	fs := pflag.NewFlagSet("halite-agent [-c CONFIG_DIR] [-l LEVEL]\n       "+
		"halite-agent call [-c CONFIG_DIR] [--local] FUNCTION [ARG ...]  (the caller, also run as halite-call; halite-agent call --help)",
		pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "configuration directory (reads agent and agent.d/*.conf, else Salt's minion and minion.d/*.conf)")
	fs.StringVarP(&o.logLevel, "log-level", "l", "", "console log level: garbage, trace, debug, info, warning, error, critical, quiet")
	fs.StringVar(&o.logFile, "log-file", "", "log file (default: the log_file option)")
	fs.BoolVarP(&o.daemon, "daemon", "d", false, "run in the background, detached; return once it is up")
	fs.StringVar(&o.pidFile, "pid-file", "", "write the process id to this file (removed at exit)")
	fs.StringVarP(&o.user, "user", "u", "", "run as this user (root only): its privileges are dropped after the log and pid files are opened")
	fs.StringVar(&o.id, "id", "", "agent id (default: the id option, else the host name)")
	fs.BoolVar(&o.finger, "print-finger", false, "print this agent's key fingerprint and exit")
	vf := cli.AddVersionFlags(fs)
	fs.BoolVar(&o.check, "check-config", false, "read and check the configuration, print its problems with file and line, and exit (0: usable, 2: errors); starts nothing")
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite-agent", os.Stdout)
	}
	if err == nil && fs.NArg() > 0 {
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err == nil && o.daemon && !daemon.IsChild() && otaMode == "" {
		// (A process agent/ota started is detached already.)
		// The child runs the rest; its start's errors come back here.
		err = daemon.Detach(os.Stderr)
		var de *daemon.ExitError
		if errors.As(err, &de) {
			err = &cli.ExitError{Code: de.Code}
		}
		return cli.Exit("halite-agent", err, fs, os.Stderr)
	}
	if err == nil {
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, hup, os.Stdout, os.Stderr)
		stop()
	}
	return cli.Exit("halite-agent", err, fs, os.Stderr)
}

// callerArgs reports whether argv asks for the caller, and its arguments:
// argv[0] named halite-call (whatever the directory: a symlink or a hard
// link to this binary), or "call" as the first argument. Only the first
// argument is looked at, so "halite-agent -c DIR call" stays the agent's
// (and is refused: it takes no arguments).
func callerArgs(argv []string) ([]string, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	if filepath.Base(argv[0]) == callcmd.Prog {
		return argv[1:], true
	}
	if len(argv) > 1 && argv[1] == "call" {
		return argv[2:], true
	}
	return nil, false
}

func run(ctx context.Context, o options, hup <-chan os.Signal, stdout, stderr io.Writer) error {
	cfg, err := config.LoadAgent(o.configDir, cli.WarnTo("halite-agent", stderr))
	if err != nil {
		return err
	}
	if o.check {
		fmt.Fprintf(stdout, "halite-agent: configuration in %s is usable\n", o.configDir)
		return nil
	}
	if o.id != "" {
		cfg.ID = o.id
	}
	if breakConfig != nil {
		breakConfig(cfg) // only in the e2e tests' broken build (unreachable.go)
	}
	if os.Getenv("GOGC") == "" && cfg.Beacons != nil {
		// Beacons allocate a little every interval, so the heap climbs to
		// the collector's floor, 4 MiB at Go's GOGC=100 (+4.9 MiB RSS with
		// five beacons at 1 s); at 25 the floor is 1 MiB (+1.25 MiB), for
		// no measurable CPU (tools/beaconbench, docs/BENCHMARKS.md).
		// GOGC in the environment wins.
		debug.SetGCPercent(25)
	}
	log, logFile, err := cli.DaemonLogger(cfg.LogOptions(), o.logLevel, o.logFile)
	if err != nil {
		return err
	}
	defer log.Sync()
	if o.pidFile != "" && otaMode != ota.ModeTrial { // the watchdog holds the pid file
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
	a, err := agent.New(cfg, log.Named("agent"))
	if err != nil {
		return err
	}
	if o.finger {
		fmt.Fprintln(stdout, a.Fingerprint())
		return nil
	}
	log.Info("starting", zap.String("version", agent.Version), zap.String("id", cfg.ID))
	defer cli.OnHangup(hup, log, logFile, func() {
		// Beacons, schedule and engines are reloaded (agent.Reload);
		// returners and the master connection keep their start-time
		// configuration.
		c, err := config.LoadAgent(o.configDir, func(config.Warning) {})
		if err == nil {
			err = a.Reload(c)
		}
		if err != nil {
			log.Error("SIGHUP: configuration not reloaded; beacons, schedule and engines kept", zap.Error(err))
			return
		}
		log.Info("SIGHUP: beacons, schedule and engines reloaded")
	})()
	if err := daemon.Ready(); err != nil {
		return err
	}
	if otaMode == ota.ModeTrial {
		a.SetTrial()
		log.Info("on trial: this build must be accepted by a master", zap.Int("within_seconds", cfg.UpdateTrialTimeout))
	}
	if cfg.Relay == nil {
		err = a.Run(ctx)
	} else {
		err = runRelay(ctx, cfg, a, log)
	}
	if m := a.Handoff(); m != nil && err == nil {
		return watchUpdate(ctx, a.OTAPaths(), m, log)
	}
	return err
}

// watchUpdate is the old build's part in an update: its agent has stopped;
// it runs the staged build on trial and, when the trial is over, becomes
// the build that boots (agent/ota: Watch, Restart).
func watchUpdate(ctx context.Context, p ota.Paths, m *ota.Marker, log *zap.Logger) error {
	log.Info("update: the new build goes on trial", zap.String("version", m.Version), zap.Int("timeout_seconds", m.Timeout))
	out, err := ota.Watch(ctx, p, os.Args[0], os.Args[1:], os.Environ(), time.Duration(m.Timeout)*time.Second,
		func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) })
	if err != nil {
		log.Error("update: watching the trial", zap.Error(err))
	}
	if out.Committed {
		log.Info("update: the new build was accepted; restarting as it", zap.String("version", m.Version))
	} else {
		log.Warn("update: the new build failed its trial; restarting the old one", zap.String("reason", out.Reason))
	}
	if ctx.Err() != nil {
		return nil // stopped: the next start settles the trial
	}
	log.Sync()
	return ota.Restart(p, os.Args, os.Environ())
}
