// Command halite-run runs master runners, like salt-run:
//
//	halite-run [-c CONFIG_DIR] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]
//
// state.event streams live events as "tag<TAB>json" lines (pretty=True
// indents the json; tagmatch=GLOB and count=N narrow the stream).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/cli"
	"github.com/halite-fleet/halite/internal/complete"
	"github.com/halite-fleet/halite/internal/complete/fleet"
	"github.com/halite-fleet/halite/internal/output"
	"github.com/halite-fleet/halite/master/api"
)

type options struct {
	configDir    string
	out          string
	outIndent    int
	outIndentSet *int // &outIndent when --out-indent was given
	outSet       bool // --out was given: a runner's "outputter" does not apply
	state        *output.StateFlags
	timeout      int  // -t: seconds a runner that sends a job waits (0: the master's timeout)
	doc          bool // -d: print the runners' documentation
	progress     bool // stderr is a terminal: show the runner's progress there
	fun          string
	args         []string
}

// completion completes halite-run's command line: the runner from the
// master's runners.
func completion(fs *pflag.FlagSet) complete.Spec {
	s := complete.Spec{Prog: "halite-run", Flags: fs, Values: func(flag string, _ []string) []string { return complete.Common(flag) },
		DirFlags: []string{"config-dir"}}
	s.Args = func(pos int, words []string) []string {
		if pos == 0 {
			return fleet.Runners(s.FlagValue(words, "config-dir", cli.DefaultConfigDir))
		}
		return nil
	}
	return s
}

func main() { os.Exit(Main()) }

// Main runs the command with os.Args and returns its exit status.
func Main() int {
	fs := pflag.NewFlagSet("halite-run [-c CONFIG_DIR] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]", pflag.ContinueOnError)
	var o options
	fs.StringVarP(&o.configDir, "config-dir", "c", cli.DefaultConfigDir, "the master's configuration directory")
	fs.StringVar(&o.out, "out", "nested", "output format: nested, json, yaml, txt, raw, pprint, newline_values_only, quiet")
	fs.StringVar(&o.out, "output", "nested", "same as --out")
	fs.IntVar(&o.outIndent, "out-indent", 0, "output_indent of the json, yaml and pprint outputters (negative: one line, flow style)")
	fs.IntVarP(&o.timeout, "timeout", "t", 0, "seconds a runner that sends a job (manage.versions, jobs.active) waits for returns (default: the master's timeout option)")
	fs.BoolVarP(&o.doc, "doc", "d", false, "print the documentation of the runners: halite-run -d [RUNNER|RUNNER.FUNCTION|GLOB]")
	fs.BoolVar(&o.doc, "documentation", false, "same as --doc")
	o.state = output.AddStateFlags(fs)
	vf := cli.AddVersionFlags(fs)
	complete.AddFlag(fs)
	if done, code := completion(fs).Handle(os.Args[1:], os.Stdout, os.Stderr); done {
		return code
	}
	err := cli.ParseFlags(fs, os.Args[1:])
	if err == nil {
		err = vf.Print("halite-run", os.Stdout)
	}
	if err == nil {
		switch {
		case o.timeout < 0:
			err = cli.Usagef("-t/--timeout must not be negative, got %d", o.timeout)
		case o.doc && fs.NArg() > 1:
			// SaltRunOptionParser._mixin_after_parsed (salt/utils/parsers.py)
			err = cli.Usagef("You can only get documentation for one method at one time")
		case o.doc:
			o.fun = fs.Arg(0)
		case fs.NArg() == 0:
			err = cli.Usagef("give a runner function, e.g. halite-run manage.status")
		default:
			o.fun, o.args = fs.Arg(0), fs.Args()[1:]
		}
	}
	if err == nil {
		o.out = output.Outputter(o.out, os.Stderr) // an unknown one falls back to nested, as in Salt
		o.outSet = fs.Changed("out") || fs.Changed("output")
		o.progress = term.IsTerminal(int(os.Stderr.Fd())) && o.out != "quiet"
		if fs.Changed("out-indent") {
			o.outIndentSet = &o.outIndent
		}
	}
	if err == nil {
		ctx, stop := cli.SignalContext()
		err = run(ctx, o, os.Stdout, os.Stderr)
		stop()
	}
	return cli.Exit("halite-run", err, fs, os.Stderr)
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	cfg, err := config.LoadMaster(o.configDir, func(config.Warning) {})
	if err != nil {
		return err
	}
	if o.doc {
		return printDocs(ctx, cfg.SocketPath(), o.fun, stdout)
	}
	req := &api.Request{Op: api.OpRunner, Fun: o.fun, User: os.Getenv("USER"), Timeout: float64(o.timeout)}
	req.Arg, req.Kwarg = cli.ParseFunArgs(o.args)
	if o.fun == "state.event" {
		return streamEvents(ctx, cfg.SocketPath(), req, stdout)
	}
	var res any
	if o.progress {
		res, err = callWithProgress(ctx, cfg.SocketPath(), req, stderr)
	} else {
		res, err = api.Call(ctx, cfg.SocketPath(), req)
	}
	if err != nil {
		if api.IsCode(err, api.CodeBadRequest) {
			fmt.Fprintln(stderr, err)
			return &cli.ExitError{Code: 2}
		}
		return err
	}
	// A runner that names its outputter (orchestrate's "highstate") is
	// printed with it unless --out says otherwise, as salt-run does
	// (print_async_event in salt/client/mixins.py); the whole return is
	// given to it (the highstate outputter unwraps "data").
	out := o.out
	if d, ok := res.(map[string]any); ok && !o.outSet {
		if name, ok := d["outputter"].(string); ok && output.Valid(name) {
			out = name
		}
	}
	oo := output.CLIOptions(out, o.outIndentSet, false)
	oo.State = o.state.Options(cfg.Raw, req.Kwarg)
	if err := output.Format(stdout, out, res, oo); err != nil {
		return err
	}
	return runnerExit(res)
}

// printDocs prints the documentation of the runners that arg selects, as
// Runner.print_docs and get_docs do (salt/runner.py,
// salt/client/mixins.py): all of them when arg is empty; with a "*", those
// it matches as a glob; else arg itself and the functions under "arg.".
// Each is "name:" then its text, sorted by name.
func printDocs(ctx context.Context, sock, arg string, stdout io.Writer) error {
	res, err := api.Call(ctx, sock, &api.Request{Op: api.OpRunner, Fun: "doc.runner", User: os.Getenv("USER")})
	if err != nil {
		return err
	}
	docs, ok := res.(map[string]any)
	if !ok {
		return fmt.Errorf("doc.runner: the master returned %T, not a dictionary", res)
	}
	prefix := strings.TrimSuffix(arg, ".") + "."
	names := make([]string, 0, len(docs))
	for name := range docs {
		switch {
		case arg == "":
		case strings.Contains(arg, "*"):
			if ok, _ := path.Match(arg, name); !ok {
				continue
			}
		case name != arg && !strings.HasPrefix(name, prefix):
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(stdout, "%s:\n%v\n\n", name, docs[name])
	}
	return nil
}

// runnerExit is salt-run's exit for a runner's return (SaltRun.run in
// salt/cli/run.py): the "retcode" of a dictionary return, or of its
// "data", else 0.
func runnerExit(res any) error {
	d, _ := res.(map[string]any)
	rc, ok := d["retcode"]
	if !ok {
		data, _ := d["data"].(map[string]any)
		rc, ok = data["retcode"]
	}
	if !ok {
		return nil
	}
	var code int
	switch v := rc.(type) {
	case int64:
		code = int(v)
	case uint64:
		code = int(min(v, 255))
	case int:
		code = v
	case float64:
		code = int(v)
	default:
		code = 1
	}
	if code == 0 {
		return nil
	}
	if code < 0 || code > 255 {
		code = 1
	}
	return &cli.ExitError{Code: code}
}

// streamEvents prints live events until count events were printed or the
// command is interrupted.
func streamEvents(ctx context.Context, sock string, req *api.Request, stdout io.Writer) error {
	pretty := false
	if v, ok := req.Kwarg["pretty"]; ok {
		pretty = v == true
		delete(req.Kwarg, "pretty")
	}
	c, err := api.Dial(ctx, sock, req)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		r, err := c.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch r.Kind {
		case api.KindError:
			return &api.RemoteError{Code: r.Code, Msg: r.Error}
		case api.KindEvent:
			var b []byte
			if pretty {
				b, err = json.MarshalIndent(jsonable(r.Data), "", "    ")
			} else {
				b, err = json.Marshal(jsonable(r.Data))
			}
			if err != nil {
				return fmt.Errorf("event %s: %w", r.Tag, err)
			}
			if pretty {
				fmt.Fprintf(stdout, "%s\t%s\n", r.Tag, b)
			} else {
				fmt.Fprintf(stdout, "%s\t%s\n", r.Tag, b)
			}
		}
		if r.Done {
			return nil
		}
	}
}

// jsonable turns byte strings into text so any event encodes as JSON.
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = jsonable(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = jsonable(x)
		}
		return out
	case []byte:
		return string(v)
	}
	return v
}

// callWithProgress runs the runner call while a status line on w (a
// terminal) shows the time it has taken and the runner's latest progress
// message (firmware.rollout's devices and batches, an orchestration's
// steps); the line is erased before the result is printed.
func callWithProgress(ctx context.Context, sock string, req *api.Request, w io.Writer) (any, error) {
	var mu sync.Mutex
	start := time.Now()
	msg := ""
	draw := func() {
		line := fmt.Sprintf("[%s %s]", req.Fun, time.Since(start).Truncate(time.Second))
		if msg != "" {
			line += " " + msg
		}
		fmt.Fprintf(w, "\r\x1b[K%s", line)
	}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				draw()
				mu.Unlock()
			}
		}
	}()
	res, err := api.CallProgress(ctx, sock, req, func(data map[string]any) {
		m, _ := data["message"].(string)
		if m == "" {
			return
		}
		mu.Lock()
		// One line: a message never moves the cursor.
		msg = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, m)
		draw()
		mu.Unlock()
	})
	close(stop)
	<-ticked
	output.ClearProgress(w)
	return res, err
}
