package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// defaultShell runs every command, as Salt's python_shell=True does for
	// jobs from the CLI.
	defaultShell = "/bin/sh"
	// maxOutput caps each of a command's streams kept in memory, so a
	// chatty command cannot exhaust a small device or outgrow a frame.
	maxOutput = 1 << 20
	// waitDelay is how long Run waits for a command's pipes after its shell
	// exited or was killed (a backgrounded child may hold them open).
	waitDelay = 2 * time.Second
)

// cmdParams are Salt's cmd.run parameters, in Salt's positional order, that
// Halite supports; runas and group are refused when given.
func cmdParams() []param {
	return []param{
		{name: "cmd", required: true}, {name: "cwd"}, {name: "stdin"}, {name: "runas"},
		{name: "group"}, {name: "shell", def: defaultShell}, {name: "python_shell"},
		{name: "env"}, {name: "rstrip", def: true}, {name: "timeout"},
		{name: "ignore_retcode", def: false}, {name: "output_loglevel", def: "debug"},
	}
}

const cmdArgsDoc = `
  cmd             the command line, run with shell -c
  cwd             working directory (default: the agent user's home)
  stdin           a string written to the command's standard input
  shell           the shell (default /bin/sh)
  env             variables to add: a dict, or a list of one-key dicts
  timeout         seconds; the command's process group is killed after it
  rstrip          strip trailing whitespace from the output (default True)
  ignore_retcode  do not fail the job on a non-zero exit
  python_shell, output_loglevel are accepted and ignored; runas and group
  are not supported.`

// modcmdModule is the cmd functions of modcmd.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modcmdModule = module{name: "cmd", funcs: []function{
	{
		name:   "run",
		params: cmdParams(),
		doc: `Run a command and return its output, standard error merged into
standard output. A non-zero exit sets the job's retcode and fails the job.
` + cmdArgsDoc + `

CLI Example:

    halite '*' cmd.run 'ls -l /tmp' cwd=/var timeout=10`,
		run: func(ctx context.Context, c *call) (any, error) {
			r, err := runCommand(ctx, c, true)
			if err != nil {
				return nil, err
			}
			return r.stdout, nil
		},
	},
	{
		name:   "run_all",
		params: cmdParams(),
		doc: `Run a command and return {pid, retcode, stdout, stderr}. A non-zero
exit sets the job's retcode and fails the job.
` + cmdArgsDoc + `

CLI Example:

    halite '*' cmd.run_all 'grep root /etc/passwd'`,
		run: func(ctx context.Context, c *call) (any, error) {
			r, err := runCommand(ctx, c, false)
			if err != nil {
				return nil, err
			}
			return map[string]any{"pid": r.pid, "retcode": r.retcode, "stdout": r.stdout, "stderr": r.stderr}, nil
		},
	},
	{
		name:   "retcode",
		params: cmdParams(),
		doc: `Run a command and return its exit code. A non-zero exit sets the
job's retcode and fails the job.
` + cmdArgsDoc + `

CLI Example:

    halite '*' cmd.retcode 'test -f /etc/passwd'`,
		run: func(ctx context.Context, c *call) (any, error) {
			r, err := runCommand(ctx, c, false)
			if err != nil {
				return nil, err
			}
			return r.retcode, nil
		},
	},
}}

func init() { register(modcmdModule) }

// cmdResult is what Salt's cmdmod._run returns.
type cmdResult struct {
	pid            int
	retcode        int
	stdout, stderr string
}

// runCommand runs the command of c with Salt's cmd.* semantics and sets the
// job's retcode to its exit code unless ignore_retcode. merge sends standard
// error to standard output (cmd.run). A command that runs past its own
// timeout is killed with its process group and reported as Salt does; if the
// job's context ends first the command is killed and ctx's cause returned.
// The command's environment carries HALITE_JOB=<agent id>/<jid>, by which
// the agent finds what a job left running when it died
// (KillJobProcesses).
func runCommand(ctx context.Context, c *call, merge bool) (cmdResult, error) {
	line, _, err := c.str("cmd")
	if err != nil {
		return cmdResult{}, err
	}
	for _, p := range []string{"runas", "group"} {
		if c.arg(p) != nil {
			return cmdResult{}, invalidf("%s is not supported by halite-agent", p)
		}
	}
	shell, ok, err := c.str("shell")
	if err != nil {
		return cmdResult{}, err
	}
	if !ok || shell == "" {
		shell = defaultShell
	}
	dir, err := commandDir(c)
	if err != nil {
		return cmdResult{}, err
	}
	env, err := commandEnv(c.arg("env"))
	if err != nil {
		return cmdResult{}, err
	}
	timeout, err := c.seconds("timeout")
	if err != nil {
		return cmdResult{}, err
	}

	runCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := osexec.CommandContext(runCtx, shell, "-c", line)
	ownProcessGroup(cmd)
	cmd.WaitDelay = waitDelay
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if c.job != nil {
		// Last, so that the job's env cannot replace it.
		cmd.Env = append(cmd.Env, jobMark(c.e.id, c.job.req.JID))
	}
	if in, ok, err := c.str("stdin"); err != nil {
		return cmdResult{}, err
	} else if ok {
		cmd.Stdin = strings.NewReader(in)
	}
	stdout, stderr := &cappedBuffer{limit: maxOutput}, &cappedBuffer{limit: maxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if merge {
		cmd.Stderr = stdout
	}

	err = cmd.Run()
	var r cmdResult
	if cmd.Process != nil {
		r.pid = cmd.Process.Pid
	}
	if ctx.Err() != nil {
		return r, context.Cause(ctx)
	}
	if runCtx.Err() != nil {
		// Salt's TimedProcTimeoutError: the message as stdout, retcode 1.
		r.stdout = fmt.Sprintf("%s : Timed out after %s seconds", line, strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
		r.retcode = 1
		c.retcode = 1
		return r, nil
	}
	var exitErr *osexec.ExitError
	switch {
	case err == nil, errors.Is(err, osexec.ErrWaitDelay):
	case errors.As(err, &exitErr):
	default:
		return r, commandf("Unable to run command '%s' with shell '%s', reason: %v", line, shell, err)
	}
	r.retcode = exitCode(cmd.ProcessState)
	r.stdout, r.stderr = stdout.text(), stderr.text()
	if isTrue(c.arg("rstrip")) {
		r.stdout = strings.TrimRight(r.stdout, " \t\r\n\v\f")
		r.stderr = strings.TrimRight(r.stderr, " \t\r\n\v\f")
	}
	if !isTrue(c.arg("ignore_retcode")) {
		c.retcode = r.retcode
	}
	return r, nil
}

// commandDir returns the working directory: cwd, which must be an existing
// absolute directory, or the agent user's home (or / without one).
func commandDir(c *call) (string, error) {
	cwd, ok, err := c.str("cwd")
	if err != nil {
		return "", err
	}
	if !ok || cwd == "" {
		if home, err := os.UserHomeDir(); err == nil {
			if fi, err := os.Stat(home); err == nil && fi.IsDir() {
				return home, nil
			}
		}
		return "/", nil
	}
	if fi, err := os.Stat(cwd); err != nil || !fi.IsDir() || !filepath.IsAbs(cwd) {
		return "", commandf("Specified cwd '%s' either not absolute or does not exist", cwd)
	}
	return cwd, nil
}

// commandEnv turns Salt's env argument (a dict, or a list of dicts) into
// KEY=value entries, sorted by key.
func commandEnv(v any) ([]string, error) {
	var maps []map[string]any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		maps = append(maps, x)
	case []any:
		for _, item := range x {
			m, ok := item.(map[string]any)
			if !ok {
				return nil, invalidf("env must be a dict or a list of dicts, not a list holding %s", typeName(item))
			}
			maps = append(maps, m)
		}
	default:
		return nil, invalidf("env must be a dict or a list of dicts, not %s", typeName(v))
	}
	var out []string
	for _, m := range maps {
		for _, k := range sortedKeys(m) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, invalidf("invalid environment variable name %q", k)
			}
			val := ""
			if m[k] != nil {
				s, ok := toString(m[k])
				if !ok {
					return nil, invalidf("environment variable %s must be a scalar, not %s", k, typeName(m[k]))
				}
				val = s
			}
			out = append(out, k+"="+val)
		}
	}
	return out, nil
}

// cappedBuffer keeps the first limit bytes written and counts the rest.
// os/exec serializes writes to it, even when it is both Stdout and Stderr.
type cappedBuffer struct {
	limit   int
	buf     []byte
	dropped int64
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.limit - len(b.buf)
	if room >= len(p) {
		b.buf = append(b.buf, p...)
	} else {
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		b.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

// text is the kept output as valid UTF-8 (invalid bytes replaced, as Salt
// decodes with errors="replace"), with a note when output was dropped.
func (b *cappedBuffer) text() string {
	s := strings.ToValidUTF8(string(b.buf), "\uFFFD")
	if b.dropped > 0 {
		s += fmt.Sprintf("\n[halite: output truncated, %d bytes dropped]", b.dropped)
	}
	return s
}

// jobMark is the environment entry that marks the processes of job jid of
// agent id. Agent ids hold no '/'.
func jobMark(id, jid string) string { return "HALITE_JOB=" + id + "/" + jid }
