package state

// The helpers the system state modules (cmd, service, pkg, user, group,
// cron, host) share: reading a chunk's arguments by Salt's loose types,
// running a program without a shell, and refusing hostile names before any
// command sees them.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/state"
)

// sysKw reads a chunk's arguments.
type sysKw state.Chunk

// has reports whether the argument was given (and is not null).
func (k sysKw) has(name string) bool { return k[name] != nil }

// str returns a scalar argument as a string (numbers as Python prints
// them); ok is false when it is absent or null.
func (k sysKw) str(name string) (s string, ok bool, err error) {
	v := k[name]
	if v == nil {
		return "", false, nil
	}
	s, ok = sysScalar(v)
	if !ok {
		return "", false, fmt.Errorf("%s must be a string, not %s", name, sysTypeName(v))
	}
	return s, true, nil
}

// boolean is Salt's salt.utils.data.is_true of the argument, def when absent.
func (k sysKw) boolean(name string, def bool) bool {
	v, ok := k[name]
	if !ok || v == nil {
		return def
	}
	return sysTrue(v)
}

// list returns an argument that is a list of scalars, or one scalar, or a
// comma-separated string when comma is set (Salt's groups, members).
func (k sysKw) list(name string, comma bool) ([]string, bool, error) {
	v := k[name]
	switch x := v.(type) {
	case nil:
		return nil, false, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := sysScalar(e)
			if !ok {
				return nil, false, fmt.Errorf("%s must be a list of strings, not a list holding %s", name, sysTypeName(e))
			}
			out = append(out, s)
		}
		return out, true, nil
	case []string:
		return x, true, nil
	}
	s, ok := sysScalar(v)
	if !ok {
		return nil, false, fmt.Errorf("%s must be a list, not %s", name, sysTypeName(v))
	}
	if comma {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, true, nil
	}
	return []string{s}, true, nil
}

// integer returns an integer argument (a number or a numeric string).
func (k sysKw) integer(name string) (n int, ok bool, err error) {
	v := k[name]
	if v == nil {
		return 0, false, nil
	}
	if s, isStr := v.(string); isStr {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, false, fmt.Errorf("%s must be an integer, not %q", name, s)
		}
		return n, true, nil
	}
	f, isNum := sysFloat(v)
	if !isNum || f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return 0, false, fmt.Errorf("%s must be an integer, not %s", name, sysTypeName(v))
	}
	return int(f), true, nil
}

func sysScalar(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		if x {
			return "True", true
		}
		return "False", true
	case []byte:
		return string(x), true
	}
	if f, ok := sysFloat(v); ok {
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10), true
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true
	}
	return "", false
}

func sysFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// sysTrue is Salt's salt.utils.data.is_true.
func sysTrue(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true") || x == "1" || strings.EqualFold(x, "yes")
	}
	if f, ok := sysFloat(v); ok {
		return f > 0
	}
	return true
}

func sysTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case string:
		return "str"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	if _, ok := sysFloat(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// sysFail is a failed state with its comment.
func sysFail(name, format string, a ...any) state.Ret {
	return state.Ret{Name: name, Result: state.False, Comment: fmt.Sprintf(format, a...)}
}

// sysBadName returns why s cannot be the name of a kind of thing (a
// package, user, group, service) handed to a command as an argument, or ""
// when it is acceptable: it must not be empty, start with '-' (an option),
// or hold whitespace, control characters or the separators of the files
// the tools write (':' ',' '/'). extra lists further refused characters.
func sysBadName(kind, s, extra string) string {
	switch {
	case s == "":
		return fmt.Sprintf("Invalid %s name: it is empty", kind)
	case s[0] == '-':
		return fmt.Sprintf("Invalid %s name %q: it must not start with '-'", kind, s)
	case len(s) > 255:
		return fmt.Sprintf("Invalid %s name %q: longer than 255 characters", kind, s[:32]+"...")
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || strings.ContainsRune(extra, r) {
			return fmt.Sprintf("Invalid %s name %q: it must not contain %q", kind, s, r)
		}
	}
	return ""
}

// sysMaxOutput caps what a command may write to each stream in memory.
const sysMaxOutput = 1 << 20

// sysOut is what a command did.
type sysOut struct {
	stdout, stderr string
	retcode        int
}

// sysRun runs argv without a shell, with stdin (when not empty) and extra
// environment entries, under LC_ALL=C so that the tools' output parses. err
// is set only when the program could not be run or ctx ended; a non-zero
// exit is retcode.
func sysRun(ctx context.Context, stdin string, env []string, argv ...string) (sysOut, error) {
	cmd := osexec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "LC_ALL=C", "LANG=C"), env...)
	cmd.WaitDelay = 2 * time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb sysCapped
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := sysOut{stdout: out.String(), stderr: errb.String()}
	if ctx.Err() != nil {
		return r, fmt.Errorf("%s: %w", argv[0], context.Cause(ctx))
	}
	if ee, ok := err.(*osexec.ExitError); ok {
		r.retcode = ee.ExitCode()
		if r.retcode < 0 {
			r.retcode = 1
		}
		return r, nil
	}
	if err != nil && err != osexec.ErrWaitDelay {
		return r, fmt.Errorf("run %s: %w", argv[0], err)
	}
	return r, nil
}

// sysMessage is a failed command's message: its stderr, else its stdout,
// else its exit code.
func (o sysOut) message() string {
	if s := strings.TrimSpace(o.stderr); s != "" {
		return s
	}
	if s := strings.TrimSpace(o.stdout); s != "" {
		return s
	}
	return fmt.Sprintf("exit code %d", o.retcode)
}

// sysCapped keeps the first sysMaxOutput bytes written to it.
type sysCapped struct{ b bytes.Buffer }

func (c *sysCapped) Write(p []byte) (int, error) {
	if room := sysMaxOutput - c.b.Len(); room > 0 {
		if len(p) > room {
			c.b.Write(p[:room])
		} else {
			c.b.Write(p)
		}
	}
	return len(p), nil
}

func (c *sysCapped) String() string { return strings.ToValidUTF8(c.b.String(), "\uFFFD") }

// sysLookPath finds a program; "" when it is absent.
func sysLookPath(prog string) string {
	if prog == "" {
		return ""
	}
	p, err := osexec.LookPath(prog)
	if err != nil {
		return ""
	}
	return p
}

// sysWriteAtomic replaces path with data durably (internal/atomicfile:
// readers see the old content or the new, never a part). The mode is the
// old file's, else mode.
func sysWriteAtomic(path string, data []byte, mode os.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.Write(path, data, mode)
}
