// Command halite-master runs the Halite master: it accepts agents and
// relays over QUIC, publishes their jobs, keeps their returns and serves the
// operator CLIs on its local socket.
//
//	halite-master [-c CONFIG_DIR] [-l LEVEL] [--log-file FILE] [--check-config]
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/master"
)

type options struct {
	configDir string
	logLevel  string
	logFile   string
	check     bool
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
	vf := cli.AddVersionFlags(fs)
	fs.BoolVar(&o.check, "check-config", false, "read and check the configuration, print its problems with file and line, and exit (0: usable, 2: errors); starts nothing")
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite-master", os.Stdout)
	}
	if err == nil && fs.NArg() > 0 {
		err = cli.Usagef("unexpected argument %q", fs.Arg(0))
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
	m, err := master.New(cfg, log.Named("master"))
	if err != nil {
		return err
	}
	m.SetConfigDir(o.configDir) // the reactor reloads its rules from here on SIGHUP
	log.Info("starting", zap.String("version", master.Version), zap.String("config_dir", o.configDir))
	// The reactor rereads its rules on SIGHUP itself (master/reactor.go).
	defer cli.OnHangup(hup, log, logFile, nil)()
	return m.Run(ctx)
}
