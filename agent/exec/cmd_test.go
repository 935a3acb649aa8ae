package exec

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCmd(t *testing.T) {
	e, _ := newTestExecutor(t)
	dir := t.TempDir()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		fun    string
		args   []any
		kwargs map[string]any
		want   Result
	}{
		{"run merges stderr and strips", "cmd.run", []any{"echo out; echo err >&2; echo"}, nil,
			Result{Return: "out\nerr", Success: true}},
		{"run non-zero exit fails the job", "cmd.run", []any{"echo partial; exit 3"}, nil,
			Result{Return: "partial", Retcode: 3}},
		{"run ignore_retcode", "cmd.run", []any{"exit 3"}, map[string]any{"ignore_retcode": true},
			Result{Return: "", Success: true}},
		{"run rstrip false", "cmd.run", []any{"printf 'a\\n\\n'"}, map[string]any{"rstrip": false},
			Result{Return: "a\n\n", Success: true}},
		{"run cwd", "cmd.run", []any{"pwd"}, map[string]any{"cwd": dir},
			Result{Return: dir, Success: true}},
		{"run cwd positional", "cmd.run", []any{"pwd", dir}, nil,
			Result{Return: dir, Success: true}},
		{"run env dict", "cmd.run", []any{"echo $A-$B"}, map[string]any{"env": map[string]any{"A": "x", "B": 2}},
			Result{Return: "x-2", Success: true}},
		{"run env list of dicts", "cmd.run", []any{"echo $A-$B"},
			map[string]any{"env": []any{map[string]any{"A": "y"}, map[string]any{"B": true}}},
			Result{Return: "y-True", Success: true}},
		{"run stdin", "cmd.run", []any{"tr a-z A-Z"}, map[string]any{"stdin": "hello"},
			Result{Return: "HELLO", Success: true}},
		{"run no stdin reads nothing", "cmd.run", []any{"cat; echo done"}, nil,
			Result{Return: "done", Success: true}},
		{"run invalid utf-8 replaced", "cmd.run", []any{`printf 'a\377b'`}, nil,
			Result{Return: "a\uFFFDb", Success: true}},
		{"run python_shell ignored", "cmd.run", []any{"echo a | tr a b"}, map[string]any{"python_shell": false},
			Result{Return: "b", Success: true}},
		{"run signal is negative retcode", "cmd.run", []any{"kill -9 $$"}, nil,
			Result{Return: "", Retcode: -9}},
		{"retcode zero", "cmd.retcode", []any{"true"}, nil, Result{Return: 0, Success: true}},
		{"retcode non-zero", "cmd.retcode", []any{"exit 7"}, nil, Result{Return: 7, Retcode: 7}},
		{"retcode command not found", "cmd.retcode", []any{"no-such-command-halite"}, nil, Result{Return: 127, Retcode: 127}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, e, tt.fun, tt.args, tt.kwargs)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("%s %v %v (-want +got):\n%s", tt.fun, tt.args, tt.kwargs, d)
			}
		})
	}
}

func TestCmdRunAll(t *testing.T) {
	e, _ := newTestExecutor(t)
	got := run(t, e, "cmd.run_all", []any{"echo out; echo err >&2; exit 2"}, nil)
	m, ok := got.Return.(map[string]any)
	if !ok {
		t.Fatalf("cmd.run_all: got %#v, want a dict", got.Return)
	}
	if pid, _ := m["pid"].(int); pid <= 0 {
		t.Errorf("pid: got %v, want a positive pid", m["pid"])
	}
	delete(m, "pid")
	want := map[string]any{"retcode": 2, "stdout": "out", "stderr": "err"}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("cmd.run_all (-want +got):\n%s", d)
	}
	if got.Retcode != 2 || got.Success {
		t.Errorf("job: got retcode %d success %v, want 2 false", got.Retcode, got.Success)
	}

	bash := "/bin/bash"
	if _, err := os.Stat(bash); err != nil {
		t.Skip("no /bin/bash for the shell= case")
	}
	got = run(t, e, "cmd.run_all", []any{"echo ${BASH_VERSION:+bash}"}, map[string]any{"shell": bash})
	if m, _ := got.Return.(map[string]any); m["stdout"] != "bash" {
		t.Errorf("shell=%s: got %#v, want stdout bash", bash, got.Return)
	}
}

func TestCmdOutputCapped(t *testing.T) {
	e, _ := newTestExecutor(t)
	got := run(t, e, "cmd.run", []any{"head -c 1100000 /dev/zero | tr '\\0' x"}, nil)
	s, _ := got.Return.(string)
	wantTail := "\n[halite: output truncated, 51424 bytes dropped]"
	if !strings.HasSuffix(s, wantTail) || len(s) != maxOutput+len(wantTail) || !got.Success {
		t.Errorf("capped output: got %d bytes ending %q, success %v, want %d bytes ending %q",
			len(s), s[max(0, len(s)-60):], got.Success, maxOutput+len(wantTail), wantTail)
	}
}

// startsBackgroundChild is a shell command that leaves a child in its
// process group, writes the child's pid to a file and waits.
func startsBackgroundChild(pidFile string) string {
	return "sleep 60 & echo $! > " + pidFile + "; wait"
}

// readPid waits for the pid file written by startsBackgroundChild.
func readPid(t *testing.T, pidFile string) int {
	t.Helper()
	var pid int
	waitFor(t, "the child's pid file", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

// gone reports whether a process has exited (it may linger as a zombie until
// its new parent reaps it).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func TestCmdTimeoutKillsProcessGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see processes")
	}
	e, _ := newTestExecutor(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	line := startsBackgroundChild(pidFile)
	start := time.Now()
	got := run(t, e, "cmd.run_all", []any{line}, map[string]any{"timeout": 0.5})
	m, _ := got.Return.(map[string]any)
	delete(m, "pid")
	want := map[string]any{"retcode": 1, "stdout": line + " : Timed out after 0.5 seconds", "stderr": ""}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("timed-out command (-want +got):\n%s", d)
	}
	if got.Success || got.Retcode != 1 {
		t.Errorf("timed-out job: got retcode %d success %v, want 1 false", got.Retcode, got.Success)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("timed-out command took %s, want about 0.5s", took)
	}
	child := readPid(t, pidFile)
	waitFor(t, "the background child to be killed with its group", func() bool { return gone(child) })
}

func TestJobTimeoutKillsCommand(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to see processes")
	}
	e, _ := newTestExecutor(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	got := e.Run(context.Background(), Request{JID: "20260101000000000003", Fun: "cmd.run",
		Args: []any{startsBackgroundChild(pidFile)}, Timeout: 500 * time.Millisecond})
	want := Result{Return: "ERROR: job 20260101000000000003 (cmd.run) timed out after 500ms", Retcode: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("job timeout (-want +got):\n%s", d)
	}
	child := readPid(t, pidFile)
	waitFor(t, "the background child to be killed with its group", func() bool { return gone(child) })
}
