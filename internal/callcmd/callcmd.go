package callcmd

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/complete"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/protocol"
)

type options struct {
	configDir string
	local     bool
	// passthrough is --retcode-passthrough: exit with the function's
	// retcode rather than 1 when it failed.
	passthrough  bool
	out          string
	outIndent    int
	outIndentSet *int // &outIndent when --out-indent was given
	logLevel     string
	grains       bool   // -g: print the grains
	doc          bool   // -d: print the functions' documentation
	id           string // --id: the minion id to use
	master       string // --master: the master option functions see
	fileRoot     string // --file-root: file_roots {base: [DIR]}
	skipGrains   bool   // --skip-grains: no grains at all
	fun          string
	args         []string
	outSet       bool // --out or --output was given
	state        *output.StateFlags
}

// completion completes halite-call's command line: the function from the
// functions this build of the agent has (halite-call runs them itself with
// --local, and its agent has the same).
func completion(fs *pflag.FlagSet) complete.Spec {
	return complete.Spec{Prog: "halite-call", Flags: fs, DirFlags: []string{"config-dir"},
		Values: func(flag string, _ []string) []string { return complete.Common(flag) },
		Args: func(pos int, _ []string) []string {
			if pos == 0 {
				return exec.New(exec.Options{}).Functions()
			}
			return nil
		}}
}

// Prog is the caller's name in its messages, whichever way it was started
// (halite-call, halite-agent call).
const Prog = "halite-call"

// Usage is the caller's synopsis.
const Usage = "halite-call [-c CONFIG_DIR] [--local] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]"

// Main runs the caller with args (the command line after the program name,
// or after halite-agent's "call") and returns its exit status: 0, 1 when
// the function failed (its retcode with --retcode-passthrough), 2 for a
// configuration error, 64 for bad command-line use, as salt-call.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet(Usage+"\n       halite-agent call [same flags and arguments]", pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "the agent's configuration directory")
	fs.BoolVar(&o.local, "local", false, "run without a master: events stay on this device")
	fs.BoolVar(&o.passthrough, "retcode-passthrough", false, "exit with the function's retcode rather than 1 when it fails")
	fs.StringVar(&o.out, "out", "nested", "output format: nested, json, yaml, txt, raw, pprint, newline_values_only, quiet")
	fs.StringVar(&o.out, "output", "nested", "same as --out")
	fs.IntVar(&o.outIndent, "out-indent", 0, "output_indent of the json, yaml and pprint outputters (negative: one line, flow style)")
	fs.StringVarP(&o.logLevel, "log-level", "l", "warning", "console log level")
	fs.BoolVarP(&o.grains, "grains", "g", false, "print the grains")
	fs.BoolVarP(&o.doc, "doc", "d", false, "print the documentation of the functions: halite-call -d [FUNCTION_PREFIX]")
	fs.BoolVar(&o.doc, "documentation", false, "same as --doc")
	fs.StringVar(&o.id, "id", "", "the minion id to use (default: the id option)")
	fs.StringVar(&o.master, "master", "", "the master option the functions see (halite-call itself never connects to a master)")
	fs.StringVar(&o.fileRoot, "file-root", "", "use this directory as the base file root (file_roots)")
	fs.BoolVar(&o.skipGrains, "skip-grains", false, "do not load grains")
	o.state = output.AddStateFlags(fs)
	vf := cli.AddVersionFlags(fs)
	complete.AddFlag(fs)
	if done, code := completion(fs).Handle(args, stdout, stderr); done {
		return code
	}
	err := cli.ParseFlags(fs, args)
	if err == nil {
		err = vf.Print(Prog, stdout)
	}
	if err == nil {
		// SaltCallOptionParser._mixin_after_parsed (salt/utils/parsers.py)
		switch {
		case fs.NArg() == 0 && !o.grains && !o.doc:
			err = cli.Usagef("Requires function, --grains or --doc")
		case fs.NArg() > 0 && o.grains:
			err = cli.Usagef("-g/--grains does not accept any arguments")
		case o.doc && fs.NArg() > 1:
			err = cli.Usagef("You can only get documentation for one method at one time")
		case fs.NArg() > 0:
			o.fun, o.args = fs.Arg(0), fs.Args()[1:]
		}
		if err == nil && o.id != "" {
			if e := protocol.ValidID(o.id); e != nil {
				err = cli.Usagef("--id: %v", e)
			}
		}
	}
	if err == nil {
		o.out = output.Outputter(o.out, stderr) // an unknown one falls back to nested, as in Salt
		o.outSet = fs.Changed("out") || fs.Changed("output")
		if fs.Changed("out-indent") {
			o.outIndentSet = &o.outIndent
		}
	}
	if err == nil && !config.ValidLogLevel(o.logLevel) {
		err = cli.Usagef("unknown log level %q", o.logLevel)
	}
	if err == nil {
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, stdout, stderr)
		stop()
	}
	return cli.Exit(Prog, err, fs, stderr)
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	cfg, err := config.LoadAgent(o.configDir, cli.WarnTo(Prog, stderr))
	if err != nil {
		return err
	}
	log, err := config.NewLogger(o.logLevel, "", true)
	if err != nil {
		return err
	}
	defer log.Sync()
	// SaltCall.run (salt/cli/call.py) sets these over the configuration.
	if o.id != "" {
		cfg.ID = o.id
	}
	if o.local {
		cfg.FileClient = "local"
	}
	if o.master != "" {
		cfg.Master = []string{o.master}
	}
	opts := cfg.Opts()
	if o.fileRoot != "" {
		root, err := filepath.Abs(o.fileRoot)
		if err != nil {
			return fmt.Errorf("--file-root: %w", err)
		}
		opts["file_roots"] = map[string]any{"base": []any{root}}
	}
	if o.doc {
		return printDocs(o.fun, stdout)
	}
	args, kwargs := cli.ParseFunArgs(o.args)
	oo := output.CLIOptions(o.out, o.outIndentSet, false)
	oo.State = o.state.Options(opts, kwargs)
	switch o.fun {
	case "event.fire":
		return fireEvent(ctx, cfg, args, stdout, oo, o.out)
	case "event.send", "event.fire_master":
		if !o.local {
			return sendEvent(ctx, cfg, args, kwargs, stdout, oo, o.out)
		}
	}
	if (strings.HasPrefix(o.fun, "beacons.") && o.fun != "beacons.list_available") ||
		strings.HasPrefix(o.fun, "schedule.") || strings.HasPrefix(o.fun, "mine.") ||
		(!o.local && !masterless(cfg) && (strings.HasPrefix(o.fun, "pillar.") || strings.HasPrefix(o.fun, "cp.") ||
			o.fun == "saltutil.refresh_pillar" || o.fun == "saltutil.pillar_refresh")) {
		// The beacons live in the running agent: ask it. So does the
		// pillar, which only the agent holds (in memory); halite-call
		// --local has an empty one. cp.* asks the master's file server
		// on the agent's session; with --local it reads file_roots.
		return callAgent(ctx, cfg, o.fun, args, kwargs, stdout, oo, o.out, o.passthrough)
	}
	g := grains.NewSkipped()
	if !o.skipGrains {
		g = grains.NewFile(cfg.ID, cfg.Grains, cfg.GrainsFile(), log.Named("grains"))
	}
	if o.grains {
		// Caller.print_grains (salt/cli/caller.py)
		return output.Format(stdout, o.out, map[string]any{"local": g.Get()}, oo)
	}
	if o.local {
		opts["local"] = true // Salt's salt-call --local: no state events
	}
	// The state functions run here with halite-call's own host; with
	// --local they compile the agent's file_roots themselves.
	host := agent.NewCallHost(cfg, g, opts)
	ex := exec.New(exec.Options{ID: cfg.ID, Version: agent.Version, Grains: g, Log: log.Named("exec"), Opts: opts, Host: host})
	host.SetExecutor(ex)
	jid := fmt.Sprintf("%020d", time.Now().UnixMicro())
	runArgs, runKwargs := args, kwargs
	viaMaster := !o.local && !masterless(cfg) && agent.CompiledByMaster(o.fun)
	if viaMaster {
		// The master compiles for this device (through the running
		// agent); the states run here, as salt-call runs them.
		if jid, runArgs, runKwargs, err = compiledJob(ctx, cfg, o.fun, args, kwargs); err != nil {
			return err
		}
		// salt:// files too large for the job come by chunks, fetched
		// by the running agent from its master.
		host.FetchThroughAgent()
	}
	res := ex.Run(ctx, exec.Request{JID: jid, Fun: o.fun, Args: runArgs, Kwargs: runKwargs})
	if viaMaster && !truthy(opts["no_return_event"]) {
		// BaseCaller.call (salt/cli/caller.py): the return goes up to
		// the master, here under the jid the master gave the job.
		if err := returnToMaster(ctx, cfg, jid, o.fun, args, kwargs, res); err != nil {
			fmt.Fprintf(stderr, "halite-call: the return was not sent to the master: %v\n", err)
		}
	}
	if len(cfg.Return) > 0 && (o.local || cfg.FileClient == "local" || cfg.MasterType == "disable" || len(cfg.MasterAddrs()) == 0) {
		// A masterless agent runs its own returners: the return is spooled
		// under cachedir/returners/call and delivered now; what a backend
		// that is down did not take waits there for the next halite-call.
		rets, err := agent.OpenReturners(ctx, cfg, "call", log)
		if err != nil {
			return err
		}
		rets.Return(jid, o.fun, args, res)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if !rets.Drain(dctx) {
			fmt.Fprintln(stderr, "halite-call: a returner is down; the return is kept under the cachedir and sent by the next halite-call")
		}
		cancel()
		rets.Close()
	}
	ret := output.InSaltOrder(o.fun, args, res.Return)
	if err := output.Format(stdout, o.outputter(ret, res.Success && res.Retcode == 0), map[string]any{"local": ret}, oo); err != nil {
		return err
	}
	return exitFor(res.Success, res.Retcode, o.passthrough)
}

// printDocs prints the documentation of every function whose name starts
// with prefix, sorted, as "name:", its text and a blank line
// (Caller.print_docs in salt/cli/caller.py).
func printDocs(prefix string, stdout io.Writer) error {
	ex := exec.New(exec.Options{Grains: grains.NewSkipped()})
	for _, name := range ex.Functions() {
		doc, _ := ex.Doc(name)
		if doc == "" || !strings.HasPrefix(name, prefix) {
			continue
		}
		if _, err := fmt.Fprintf(stdout, "%s:\n%s\n\n", name, doc); err != nil {
			return err
		}
	}
	return nil
}

// exitFor is salt-call's exit for a function's result (SaltCall in
// salt/cli/caller.py): 0 when it succeeded, else 1, or with
// --retcode-passthrough the retcode itself.
func exitFor(ok bool, retcode int, passthrough bool) error {
	if ok && retcode == 0 {
		return nil
	}
	code := 1
	if passthrough && retcode > 0 && retcode <= 255 {
		code = retcode
	}
	return &cli.ExitError{Code: code}
}

// sendEvent fires an event through the running agent to the master:
// event.send TAG [DATA] (DATA a dictionary, or keyword arguments).
func sendEvent(ctx context.Context, cfg *config.Agent, args []any, kwargs map[string]any, stdout io.Writer, oo output.Options, out string) error {
	if len(args) == 0 {
		return cli.Usagef("event.send needs a tag: halite-call event.send TAG '{\"key\": \"value\"}'")
	}
	tag := fmt.Sprint(args[0])
	data := map[string]any{}
	if len(args) > 1 {
		d, ok := args[1].(map[string]any)
		if !ok {
			return cli.Usagef("event data must be a dictionary, e.g. '{\"key\": \"value\"}', got %v", args[1])
		}
		data = d
	}
	for k, v := range kwargs {
		if k != "with_grains" && k != "with_env" && k != "with_pillar" {
			data[k] = v
		}
	}
	resp, err := agent.LocalCall(ctx, cfg.SocketPath(), &agent.LocalRequest{Op: "event.send", Tag: tag, Data: data})
	if err != nil {
		return err
	}
	if !resp.OK {
		output.Format(stdout, out, map[string]any{"local": false}, oo)
		return fmt.Errorf("event not sent: %s", resp.Error)
	}
	return output.Format(stdout, out, map[string]any{"local": true}, oo)
}

// fireEvent fires an event on the running agent's own bus, where its
// caller reactor sees it: event.fire DATA TAG, as salt-call event.fire.
func fireEvent(ctx context.Context, cfg *config.Agent, args []any, stdout io.Writer, oo output.Options, out string) error {
	if len(args) != 2 {
		return cli.Usagef("event.fire needs data and a tag: halite-call event.fire '{\"key\": \"value\"}' TAG")
	}
	data, ok := args[0].(map[string]any)
	if !ok {
		return cli.Usagef("event data must be a dictionary, e.g. '{\"key\": \"value\"}', got %v", args[0])
	}
	resp, err := agent.LocalCall(ctx, cfg.SocketPath(), &agent.LocalRequest{Op: "event.fire", Tag: fmt.Sprint(args[1]), Data: data})
	if err != nil {
		return err
	}
	if !resp.OK {
		output.Format(stdout, out, map[string]any{"local": false}, oo)
		return fmt.Errorf("event not fired: %s", resp.Error)
	}
	return output.Format(stdout, out, map[string]any{"local": true}, oo)
}

// callAgent runs a function in the running agent (beacons.*), whose state
// a separate process does not have.
func callAgent(ctx context.Context, cfg *config.Agent, fun string, args []any, kwargs map[string]any, stdout io.Writer, oo output.Options, out string, passthrough bool) error {
	resp, err := agent.LocalCall(ctx, cfg.SocketPath(), &agent.LocalRequest{Op: "call", Fun: fun, Args: args, Kwargs: kwargs})
	if err != nil {
		return err
	}
	if resp.Error != "" {
		return fmt.Errorf("%s: %s", fun, resp.Error)
	}
	if err := output.Format(stdout, out, map[string]any{"local": resp.Return}, oo); err != nil {
		return err
	}
	return exitFor(resp.OK, resp.Retcode, passthrough)
}

// outputter is the outputter for the function's return, as salt-call picks
// it: --out when given (--out highstate meaning the function's own), else
// the function's: highstate for the state runs (salt/modules/state.py
// __outputter__), nested for the rest.
func (o options) outputter(ret any, ok bool) string {
	out := ""
	if o.outSet {
		out = o.out
	}
	return output.ReturnOutputter(out, o.fun, ret, ok)
}

// masterless reports whether the agent's configuration has no master
// (Salt's is_local in BaseCaller.call, less --local).
func masterless(cfg *config.Agent) bool {
	return cfg.FileClient == "local" || cfg.MasterType == "disable" || len(cfg.MasterAddrs()) == 0
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}

// compiledJob asks the running agent for the master's compile of fun for
// this device: the job's jid, arguments and keyword arguments (with
// __state__), verified by the agent with the master's key.
func compiledJob(ctx context.Context, cfg *config.Agent, fun string, args []any, kwargs map[string]any) (string, []any, map[string]any, error) {
	resp, err := agent.LocalCallWithin(ctx, cfg.SocketPath(),
		&agent.LocalRequest{Op: "state.get", Fun: fun, Args: args, Kwargs: kwargs}, 3*time.Minute)
	if err != nil {
		return "", nil, nil, err
	}
	if !resp.OK {
		return "", nil, nil, fmt.Errorf("%s", resp.Error)
	}
	m, _ := resp.Return.(map[string]any)
	jid, _ := m["jid"].(string)
	jargs, _ := m["arg"].([]any)
	jkw, _ := m["kwarg"].(map[string]any)
	if !protocol.IsJID(jid) || jkw == nil {
		return "", nil, nil, fmt.Errorf("%s: the agent's answer has no job", fun)
	}
	return jid, jargs, jkw, nil
}

// returnToMaster hands the return of the master-compiled job jid to the
// running agent, which sends it to the master.
func returnToMaster(ctx context.Context, cfg *config.Agent, jid, fun string, args []any, kwargs map[string]any, res exec.Result) error {
	funArgs := append([]any{}, args...)
	if len(kwargs) > 0 {
		funArgs = append(funArgs, kwargs)
	}
	resp, err := agent.LocalCall(ctx, cfg.SocketPath(), &agent.LocalRequest{Op: "return", Data: map[string]any{
		"jid": jid, "fun": fun, "fun_args": funArgs, "return": res.Return, "retcode": res.Retcode, "success": res.Success}})
	if err != nil {
		return err
	}
	if !resp.OK {
		return fmt.Errorf("%s", resp.Error)
	}
	return nil
}
