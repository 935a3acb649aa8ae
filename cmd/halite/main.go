// Command halite runs jobs on minions, like salt:
//
//	halite [options] TARGET FUNCTION [ARG ...] [KEY=VALUE ...]
//
// It asks the master (found through the master's configuration, -c) to
// publish the job, prints each return as it arrives, and exits non-zero if
// an expected minion did not return or a return failed.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/batch"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/complete"
	"github.com/halite-fleet/halite/internal/complete/fleet"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/internal/yamlbound"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/targets"
)

type options struct {
	configDir    string
	tgtType      string
	delimiter    string
	timeout      int
	gatherJob    int
	async        bool
	out          string
	outIndent    int
	outIndentSet *int // &outIndent when --out-indent was given
	static       bool
	verbose      bool
	showJID      bool
	ret          string
	retConfig    string
	retKwargs    string
	preview      bool
	noColor      bool
	forceColor   bool
	tgt          string
	fun          string
	args         []string
	argsSep      string     // --args-separator
	funs         []string   // a compound command's functions (splitCompound)
	funGroups    [][]string // and their arguments' words
	stdoutIsTTY  bool
	stderrIsTTY  bool
	batch        string
	batchWait    float64
	failhard     bool   // --failhard: stop a batch at the first bad return
	batchMaxFail string // --batch-max-fail: stop starting minions once more than N (N%) failed
	subset       int
	hideTimeout  bool
	doc          bool
	logLevel     string
	outFile      string
	outAppend    bool
	outSet       bool // --out or --output was given
	state        *output.StateFlags
}

func main() { os.Exit(Main()) }

// Main runs the command with os.Args and returns its exit status.
func Main() int {
	fs := pflag.NewFlagSet("halite [options] TARGET FUNCTION [ARG ...] [KEY=VALUE ...]", pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "the master's configuration directory")
	types := []struct{ long, short, typ, help string }{
		{"pcre", "E", "pcre", "target is a Perl-compatible regular expression on minion ids"},
		{"list", "L", "list", "target is a comma-separated list of minion ids"},
		{"grain", "G", "grain", "target is a grain match: 'key:glob'"},
		{"grain-pcre", "P", "grain_pcre", "target is a grain regular expression: 'key:regex'"},
		{"pillar", "I", "pillar", "target is a pillar match: 'key:glob'"},
		{"pillar-pcre", "J", "pillar_pcre", "target is a pillar regular expression"},
		{"ipcidr", "S", "ipcidr", "target is an IP address or CIDR subnet"},
		{"compound", "C", "compound", "target is a compound expression"},
		{"nodegroup", "N", "nodegroup", "target is a nodegroup from the master configuration"},
	}
	typeFlags := make([]*bool, len(types))
	for i, t := range types {
		typeFlags[i] = fs.BoolP(t.long, t.short, false, t.help)
	}
	fs.StringVar(&o.delimiter, "delimiter", "", "key delimiter of grain and pillar targets (default ':')")
	fs.IntVarP(&o.timeout, "timeout", "t", 0, "seconds to wait for returns before asking the minions that have not returned whether they still run the job (default: the master's timeout option, 5)")
	fs.IntVar(&o.gatherJob, "gather-job-timeout", 0, "seconds to wait for the minions' answers to saltutil.find_job, asked when the timeout has passed; minions that still run the job are waited for (default: the master's gather_job_timeout option, 10)")
	fs.BoolVar(&o.async, "async", false, "publish the job, print its jid and exit without waiting")
	fs.StringVar(&o.out, "out", "nested", "output format: nested, json, yaml, txt, raw, pprint, newline_values_only, quiet")
	fs.StringVar(&o.out, "output", "nested", "same as --out")
	fs.IntVar(&o.outIndent, "out-indent", 0, "output_indent of the json, yaml and pprint outputters (negative: one line, flow style)")
	fs.BoolVar(&o.static, "static", false, "print all returns at once at the end, as one document")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "print the jid, and the minions that did not return")
	fs.BoolVar(&o.showJID, "show-jid", false, "print the jid")
	fs.StringVar(&o.ret, "return", "", "comma-separated returners that also receive the returns")
	fs.StringVar(&o.retConfig, "return_config", "", "read the returners' options under '<CONFIG>.<returner>.' first (Salt's alternative configurations)")
	fs.StringVar(&o.retKwargs, "return_kwargs", "", "returner options over every other, as a dictionary: '{\"filename\": \"/tmp/x\"}'")
	fs.BoolVar(&o.preview, "preview-target", false, "print the minions the target matches and run nothing")
	fs.BoolVar(&o.noColor, "no-color", false, "never colour the output")
	fs.BoolVar(&o.forceColor, "force-color", false, "colour the output even when it is not a terminal")
	fs.StringVarP(&o.batch, "batch-size", "b", "", "run on N minions, or N% of them, at a time, rolling: ping the target first, then start the next minion as each returns")
	fs.StringVar(&o.batch, "batch", "", "same as --batch-size")
	fs.Float64Var(&o.batchWait, "batch-wait", 0, "seconds to wait after each return before its batch slot takes the next minion")
	fs.BoolVar(&o.failhard, "failhard", false, "stop batch execution upon the first bad return (retcode > 0 or no return)")
	fs.StringVar(&o.batchMaxFail, "batch-max-fail", "", "with --batch-size: stop starting minions once more than N, or N% of them, have failed (the running ones finish)")
	fs.IntVarP(&o.subset, "subset", "s", 0, "run on a random N of the targeted minions that have the function")
	fs.BoolVar(&o.hideTimeout, "hide-timeout", false, "do not show (or count as failed) the minions that did not return")
	fs.StringVar(&o.argsSep, "args-separator", ",", "separator of the functions' arguments in a compound command (halite '*' cmd.run,test.ping 'echo hi' , ): useful when an argument holds commas")
	fs.BoolVarP(&o.doc, "doc", "d", false, "print the documentation of the minions' functions (sys.doc): halite -d [TARGET [FUNCTION]]")
	fs.BoolVar(&o.doc, "documentation", false, "same as --doc")
	fs.StringVarP(&o.logLevel, "log-level", "l", "", "console log level: garbage, trace, debug, info, warning, error, critical, quiet")
	fs.StringVar(&o.outFile, "out-file", "", "write the output to this file (emptied first) instead of standard output")
	fs.StringVar(&o.outFile, "output-file", "", "same as --out-file")
	fs.BoolVar(&o.outAppend, "out-file-append", false, "append to --out-file instead of emptying it first")
	fs.BoolVar(&o.outAppend, "output-file-append", false, "same as --out-file-append")
	o.state = output.AddStateFlags(fs)
	vf := cli.AddVersionFlags(fs)
	complete.AddFlag(fs)
	if done, code := completion(fs).Handle(os.Args[1:], os.Stdout, os.Stderr); done {
		return code
	}
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite", os.Stdout)
	}
	if err == nil {
		for i, t := range types {
			if *typeFlags[i] {
				if o.tgtType != "" {
					err = cli.Usagef("give at most one target type option")
				}
				o.tgtType = t.typ
			}
		}
	}
	if err == nil {
		err = o.positional(fs.Args())
	}
	if err == nil {
		o.out = output.Outputter(o.out, os.Stderr) // an unknown one falls back to nested, as in Salt
		o.outSet = fs.Changed("out") || fs.Changed("output")
		if fs.Changed("out-indent") {
			o.outIndentSet = &o.outIndent
		}
	}
	if err == nil {
		o.stdoutIsTTY = term.IsTerminal(int(os.Stdout.Fd()))
		o.stderrIsTTY = term.IsTerminal(int(os.Stderr.Fd()))
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, os.Stdout, os.Stderr)
		stop()
	}
	return cli.Exit("halite", err, fs, os.Stderr)
}

// completion completes halite's command line: the target from the
// accepted keys, the function from the names the master has seen from its
// agents.
func completion(fs *pflag.FlagSet) complete.Spec {
	s := complete.Spec{Prog: "halite", Flags: fs, Values: func(flag string, _ []string) []string { return complete.Common(flag) },
		DirFlags: []string{"config-dir"}}
	s.Args = func(pos int, words []string) []string {
		dir := s.FlagValue(words, "config-dir", cli.DefaultConfigDir)
		switch pos {
		case 0:
			return fleet.Keys(dir, "minions")
		case 1:
			return fleet.Functions(dir)
		}
		return nil
	}
	return s
}

func (o *options) positional(args []string) error {
	if o.preview {
		if len(args) != 1 {
			return cli.Usagef("--preview-target takes a target and nothing else")
		}
		o.tgt = args[0]
		return nil
	}
	if o.doc {
		// SaltCMDOptionParser._mixin_after_parsed (salt/utils/parsers.py):
		// the target defaults to '*', the function is sys.doc, and one
		// function's (or module's) documentation at a time.
		if len(args) == 0 {
			args = []string{"*"}
		}
		if len(args) < 2 || args[1] != "sys.doc" {
			args = append([]string{args[0], "sys.doc"}, args[1:]...)
		}
		if len(args) > 3 {
			return cli.Usagef("you can only get documentation for one method at one time")
		}
	}
	if o.batch != "" {
		if err := parseBatch(o.batch); err != nil {
			return err
		}
		if o.async {
			return cli.Usagef("--batch-size and --async do not go together")
		}
	}
	if o.batchMaxFail != "" {
		if o.batch == "" {
			return cli.Usagef("--batch-max-fail goes with --batch-size")
		}
		if err := batch.CheckLimit(o.batchMaxFail); err != nil {
			return cli.Usagef("%v", err)
		}
	}
	if o.batchWait < 0 {
		return cli.Usagef("--batch-wait takes seconds, not %v", o.batchWait)
	}
	if o.subset < 0 {
		return cli.Usagef("--subset takes a number of minions, not %d", o.subset)
	}
	if o.subset > 0 && o.batch != "" {
		return cli.Usagef("--subset and --batch-size do not go together")
	}
	if o.logLevel != "" && !config.ValidLogLevel(o.logLevel) {
		return cli.Usagef("unknown log level %q", o.logLevel)
	}
	if o.outAppend && o.outFile == "" {
		return cli.Usagef("--out-file-append goes with --out-file")
	}
	// Salt exits 42 without a target or a function (SaltCMDOptionParser in
	// salt/utils/parsers.py).
	switch len(args) {
	case 0:
		return &cli.UsageError{Msg: "give a target and a function, e.g. halite '*' test.ping", Code: cli.ExitNoTarget}
	case 1:
		return &cli.UsageError{Msg: fmt.Sprintf("no function given after the target %q", args[0]), Code: cli.ExitNoTarget}
	}
	o.tgt, o.fun, o.args = args[0], args[1], args[2:]
	var err error
	o.funs, o.funGroups, err = splitCompound(o.fun, o.args, o.argsSep)
	return err
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	cfg, err := config.LoadMaster(o.configDir, func(config.Warning) {})
	if err != nil {
		return err
	}
	req := &api.Request{
		Op: api.OpPublish, Tgt: o.tgt, TgtType: o.tgtType, Delimiter: o.delimiter,
		Fun: o.fun, Timeout: float64(o.timeout), GatherJobTimeout: float64(o.gatherJob), Ret: o.ret, Async: o.async, Preview: o.preview,
		User: os.Getenv("USER"), ReturnConfig: o.retConfig,
	}
	if o.retKwargs != "" {
		if err := yamlbound.Unmarshal([]byte(o.retKwargs), &req.ReturnKwargs); err != nil || req.ReturnKwargs == nil {
			return cli.Usagef("--return_kwargs takes a dictionary, e.g. '{\"filename\": \"/tmp/x\"}': %q", o.retKwargs)
		}
	}
	if req.User == "" {
		req.User = "root"
	}
	if o.funs != nil {
		setCompound(req, o.funs, o.funGroups) // compound.go
	} else {
		req.Arg, req.Kwarg = cli.ParseFunArgs(o.args)
	}
	if o.tgtType == "list" {
		// -L 'web1, web2' and -L 'web1 web2' name web1 and web2, as in salt.
		req.Tgt = strings.Join(targets.CLIList(o.tgt), ",")
	}
	log, err := cliLogger(o.logLevel)
	if err != nil {
		return err
	}
	defer log.Sync()
	color := o.forceColor || (o.stdoutIsTTY && !o.noColor)
	out := stdout // the returns; messages stay on stdout and stderr
	if o.outFile != "" {
		// process_output_file in salt/utils/parsers.py: emptied first
		// unless --out-file-append; the output is appended to it.
		flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
		if !o.outAppend {
			flags |= os.O_TRUNC
		}
		f, err := os.OpenFile(o.outFile, flags, 0o644)
		if err != nil {
			return fmt.Errorf("open --out-file: %w", err)
		}
		defer f.Close()
		out, color = f, o.forceColor
	}
	oo := output.CLIOptions(o.out, o.outIndentSet, color)
	oo.State = o.state.Options(cfg.Raw, req.Kwarg)
	socket := cfg.SocketPath()
	log.Debug("request", zap.String("socket", socket), zap.String("tgt", req.Tgt), zap.String("fun", req.Fun))
	if o.subset > 0 && !o.preview {
		ids, err := subsetTargets(ctx, socket, req, o.subset)
		if err != nil {
			return publishError(err, stdout, stderr)
		}
		log.Debug("subset", zap.Strings("minions", ids))
		if len(ids) == 0 {
			// cmd_cli on an empty list, as salt's cmd_subset does.
			return publishError(&api.RemoteError{Code: api.CodeNoMinions, Msg: "No minions matched the target. No command was sent, no jid was assigned."}, stdout, stderr)
		}
		req.Tgt, req.TgtType, req.Delimiter = strings.Join(ids, ","), "list", ""
	}
	if o.batch != "" && !o.preview {
		return runBatch(ctx, o, socket, req, oo, out, stderr)
	}
	if req.Fun == "sys.doc" && !o.preview && !o.async {
		rets, _, _, err := collect(ctx, socket, req)
		if err != nil {
			return publishError(err, stdout, stderr)
		}
		return printDocs(rets, o, oo, out, stderr)
	}
	c, err := api.Dial(ctx, socket, req)
	if err != nil {
		return err
	}
	defer c.Close()
	first, err := c.Next()
	if err != nil {
		return err
	}
	if first.Kind == api.KindError {
		return publishError(&api.RemoteError{Code: first.Code, Msg: first.Error}, stdout, stderr)
	}
	stdout = out
	if o.preview {
		return output.Format(stdout, o.out, toAny(first.Minions), oo)
	}
	if o.async {
		fmt.Fprintf(stdout, "Executed command with job ID: %s\n", first.JID)
		return nil
	}
	if o.verbose || o.showJID {
		fmt.Fprintf(stdout, "jid: %s\n", first.JID)
	}
	if o.verbose {
		fmt.Fprintf(stdout, "Executing job with jid %s\n-------------------------------------------\n\n", first.JID)
	}
	total := len(first.Minions)
	progress := o.stderrIsTTY && o.out != "quiet"
	collected := map[string]any{}
	failed := false
	done := 0
	if progress {
		output.Progress(stderr, done, total)
	}
	for {
		r, err := c.Next()
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "\nExiting gracefully on Ctrl-c\nThis job's jid is: %s\nThe minions may not have all finished running and any remaining returns will be available with: halite-run jobs.lookup_jid %s\n", first.JID, first.JID)
				return &cli.ExitError{Code: 1}
			}
			// The master went away (stopped, killed, restarted): say so,
			// with what came back, and where the rest will be.
			if progress {
				output.ClearProgress(stderr)
			}
			if o.static && len(collected) > 0 {
				output.Format(stdout, o.out, collected, oo)
			}
			fmt.Fprintf(stderr, "ERROR: the master stopped answering while waiting for the returns of job %s "+
				"(%d of %d minions returned; %v).\n"+
				"The agents keep the other returns on disk and deliver them once a master is back "+
				"(with master_type: failover, to the master they fail over to); look them up there with: "+
				"halite-run jobs.lookup_jid %s\n", first.JID, done, total, err, first.JID)
			return &cli.ExitError{Code: 1}
		}
		switch r.Kind {
		case api.KindReturn:
			done++
			id, _ := r.Data["id"].(string)
			ok := returnOK(r.Data)
			if !ok {
				failed = true
			}
			ret := inSaltOrder(req, r.Data["return"])
			if o.static {
				collected[id] = ret
				continue
			}
			if progress {
				output.ClearProgress(stderr)
			}
			if err := output.Format(stdout, o.outputter(ret, ok), map[string]any{id: ret}, oo); err != nil {
				return err
			}
			if progress {
				output.Progress(stderr, done, total)
			}
		case api.KindError:
			if progress {
				output.ClearProgress(stderr)
			}
			fmt.Fprintln(stderr, r.Error)
			return &cli.ExitError{Code: 1}
		}
		if r.Done {
			if progress {
				output.ClearProgress(stderr)
			}
			notConnected := map[string]bool{}
			for _, id := range r.NotConnected {
				notConnected[id] = true
			}
			missing := append([]string(nil), r.Missing...)
			sort.Strings(missing)
			for _, id := range missing {
				if o.hideTimeout {
					// show_timeout=False (salt/utils/parsers.py
					// --hide-timeout): salt yields nothing for them.
					continue
				}
				failed = true
				why := "Minion did not return. [No response]"
				if notConnected[id] {
					why = "Minion did not return. [Not connected]"
				}
				if o.static {
					collected[id] = why
				} else if o.out != "quiet" {
					output.Format(stdout, o.out, map[string]any{id: why}, oo)
				}
			}
			if o.static {
				if err := output.Format(stdout, o.outputter(nil, true), collected, oo); err != nil {
					return err
				}
			}
			if o.verbose && len(missing) > 0 && !o.hideTimeout {
				fmt.Fprintf(stderr, "ERROR: %d of %d minions did not return within %s\n", len(missing), total, timeoutText(o.timeout))
			}
			if failed {
				// SaltCMD.run in salt/cli/salt.py.
				fmt.Fprintln(stderr, "ERROR: Minions returned with non-zero exit code")
				return &cli.ExitError{Code: 1}
			}
			return nil
		}
	}
}

// printDocs is SaltCMD._print_docs (salt/cli/salt.py): the functions'
// docs of all the minions, merged, sorted, as "fun:", the doc and an empty
// line; with --out, one nested document per function.
func printDocs(rets map[string]map[string]any, o options, oo output.Options, out, stderr io.Writer) error {
	docs := map[string]any{}
	for _, r := range rets {
		m, ok := r["return"].(map[any]any)
		if !ok {
			if ms, ok := r["return"].(map[string]any); ok {
				m = make(map[any]any, len(ms))
				for k, v := range ms {
					m[k] = v
				}
			}
		}
		for k, v := range m {
			fun, ok := k.(string)
			if _, seen := docs[fun]; ok && !seen && v != nil && v != "" {
				docs[fun] = v
			}
		}
	}
	if len(docs) == 0 && len(rets) == 0 {
		fmt.Fprintln(stderr, "No minions found to gather docs from")
		return &cli.ExitError{Code: 2}
	}
	funs := make([]string, 0, len(docs))
	for fun := range docs {
		funs = append(funs, fun)
	}
	sort.Strings(funs)
	for _, fun := range funs {
		if o.outSet {
			if err := output.Format(out, "nested", map[string]any{fun: docs[fun]}, oo); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(out, "%s:\n%v\n\n", fun, docs[fun]); err != nil {
			return err
		}
	}
	return nil
}

// publishError reports a failed publication as salt does and returns the
// exit status: a target that matched nothing is printed on stdout, then
// "No return received", status 2 (_check_pub_data in
// salt/client/__init__.py, SaltCMD._output_ret in salt/cli/salt.py).
func publishError(err error, stdout, stderr io.Writer) error {
	var re *api.RemoteError
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case api.CodeNoMinions:
		fmt.Fprintln(stdout, re.Msg)
		fmt.Fprintln(stderr, "ERROR: No return received")
		return &cli.ExitError{Code: 2}
	case api.CodeBadRequest:
		fmt.Fprintln(stderr, re.Msg)
		return &cli.ExitError{Code: 2}
	}
	fmt.Fprintln(stderr, re.Msg)
	return &cli.ExitError{Code: 1}
}

// cliLogger is the CLI's own console logger at -l LEVEL (default
// warning, as salt's CLIs), on standard error.
func cliLogger(level string) (*zap.Logger, error) {
	if level == "" {
		level = "warning"
	}
	log, err := config.NewLogger(level, "", true)
	if err != nil {
		return nil, fmt.Errorf("start logging: %w", err)
	}
	return log, nil
}

// returnOK reports whether a return succeeded: success true and retcode 0.
func returnOK(ret map[string]any) bool {
	if s, ok := ret["success"].(bool); ok && !s {
		return false
	}
	switch rc := ret["retcode"].(type) {
	case int64:
		return rc == 0
	case uint64:
		return rc == 0
	case int:
		return rc == 0
	}
	return true
}

func timeoutText(t int) string {
	if t <= 0 {
		return "the master's timeout"
	}
	return (time.Duration(t) * time.Second).String()
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
