package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// Cases from Salt's tests/pytests/unit/states/test_cmd.py (test_run,
// test_script, test_wait, test_mod_watch) and salt/states/cmd.py.
func TestCmdRun(t *testing.T) {
	h := newSysHost(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")

	r := sysCall(t, h, "cmd.run", "touch "+mark, true, nil)
	sysWant(t, "test=True", r, state.None, `Command "touch `+mark+`" would have been executed`)
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("test=True ran the command")
	}

	r = sysCall(t, h, "cmd.run", "echo out; echo err >&2; touch "+mark, false, nil)
	sysWant(t, "run", r, state.True, `Command "echo out; echo err >&2; touch `+mark+`" run`)
	if r.Changes["stdout"] != "out" || r.Changes["stderr"] != "err" || r.Changes["retcode"] != 0 || r.Changes["pid"] == nil {
		t.Fatalf("changes = %v, want pid, retcode 0, stdout out, stderr err", r.Changes)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the command did not run")
	}

	r = sysCall(t, h, "cmd.run", "exit 3", false, nil)
	sysWant(t, "non-zero", r, state.False, `Command "exit 3" run`)
	if r.Changes["retcode"] != 3 {
		t.Fatalf("retcode = %v, want 3", r.Changes["retcode"])
	}
	r = sysCall(t, h, "cmd.run", "exit 3", false, map[string]any{"success_retcodes": []any{3}})
	sysWant(t, "success_retcodes", r, state.True, "")

	r = sysCall(t, h, "cmd.run", "pwd; echo $FOO", false, map[string]any{"cwd": dir, "env": []any{map[string]any{"FOO": "bar"}}})
	if r.Changes["stdout"] != dir+"\nbar" {
		t.Fatalf("cwd/env: stdout %q", r.Changes["stdout"])
	}
	r = sysCall(t, h, "cmd.run", "true", false, map[string]any{"cwd": filepath.Join(dir, "nope")})
	sysWant(t, "cwd", r, state.False, `Desired working directory "`+filepath.Join(dir, "nope")+`" is not available`)
	r = sysCall(t, h, "cmd.run", "true", false, map[string]any{"env": "A=1"})
	sysWant(t, "env", r, state.False, "Invalidly-formatted 'env' parameter. See documentation.")
	r = sysCall(t, h, "cmd.run", "true", false, map[string]any{"runas": "nobody"})
	sysWant(t, "runas", r, state.False, "runas is not supported by halite-agent")

	// stateful: the last line says what changed (salt/states/cmd.py _reinterpreted_state).
	r = sysCall(t, h, "cmd.run", `echo hello; echo "changed=yes comment='all good'"`, false, map[string]any{"stateful": true})
	sysWant(t, "stateful", r, state.True, "all good")
	if r.Changes["stdout"] != "hello" {
		t.Fatalf("stateful changes %v", r.Changes)
	}
	r = sysCall(t, h, "cmd.run", `echo '{"changed": false, "comment": "nothing"}'`, false, map[string]any{"stateful": true})
	sysWant(t, "stateful json", r, state.True, "nothing")
	if len(r.Changes) != 0 {
		t.Fatalf("unchanged stateful has changes %v", r.Changes)
	}
}

func TestCmdWaitAndModWatch(t *testing.T) {
	h := newSysHost(t)
	mark := filepath.Join(t.TempDir(), "ran")
	r := sysCall(t, h, "cmd.wait", "touch "+mark, false, nil)
	sysWant(t, "wait", r, state.True, "")
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("cmd.wait ran without a watched change")
	}
	r = sysWatch(t, h, "cmd.wait", "touch "+mark, true, nil)
	sysWant(t, "mod_watch test", r, state.None, `Command "touch `+mark+`" would have been executed`)
	r = sysWatch(t, h, "cmd.wait", "touch "+mark, false, nil)
	sysWant(t, "mod_watch", r, state.True, `Command "touch `+mark+`" run`)
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("mod_watch did not run the command")
	}
	r = sysWatch(t, h, "cmd.call", "x", false, nil)
	sysWant(t, "mod_watch other", r, state.False, "cmd.call does not work with the watch requisite, please use cmd.wait or cmd.wait_script")
}

func TestCmdScript(t *testing.T) {
	h := newSysHost(t)
	files := map[string]any{"salt://scripts/hi.sh": map[string]any{"data": []byte("#!/bin/sh\necho \"hi $1 $2\"\n"), "sha256": "x"}}
	r := sysCall(t, h, "cmd.script", "salt://scripts/hi.sh", true, map[string]any{"__files__": files})
	sysWant(t, "test", r, state.None, "Command 'salt://scripts/hi.sh' would have been executed")
	r = sysCall(t, h, "cmd.script", "salt://scripts/hi.sh", false, map[string]any{"__files__": files, "args": "a b"})
	sysWant(t, "script", r, state.True, "Command 'salt://scripts/hi.sh' run")
	if r.Changes["stdout"] != "hi a b" {
		t.Fatalf("stdout %q", r.Changes["stdout"])
	}
	r = sysCall(t, h, "cmd.script", "salt://scripts/hi.sh one two", false, map[string]any{"__files__": files})
	if r.Changes["stdout"] != "hi one two" {
		t.Fatalf("args from name: stdout %q", r.Changes["stdout"])
	}
	r = sysCall(t, h, "cmd.script", "run-it", false, map[string]any{"source": "salt://scripts/none.sh", "__files__": files})
	sysWant(t, "missing", r, state.False, "Unable to cache script salt://scripts/none.sh from saltenv 'base'")
}
