// Package clitest runs the programs' testscript tests (testdata/*.txtar
// beside each cmd) with their real Main in-process, and adds the "status"
// script command the scripts use to check exit codes.
package clitest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// Main is the TestMain of a cmd package: it lets scripts run the command
// called name, whose Main is main.
func Main(m *testing.M, name string, main func() int) { Mains(m, map[string]func() int{name: main}) }

// Mains is Main for a multi-call program: scripts run each name of mains,
// and the process started for a name has it as its argv[0] (testscript
// links the test binary under each name), as a symlink would on a device.
func Mains(m *testing.M, mains map[string]func() int) { os.Exit(testscript.RunMain(m, mains)) }

// Run runs testdata/*.txtar. Besides testscript's commands, a script may
// say "status N COMMAND [ARG ...]": run COMMAND and require exit status N
// (its stdout and stderr are then checked as after exec). "[root]" is a
// condition: the test runs as root.
func Run(t *testing.T) { RunWith(t, nil) }

// RunWith is Run with more script commands: Fixtures (a master to talk
// to, agents) and a command's own.
func RunWith(t *testing.T, cmds map[string]func(ts *testscript.TestScript, neg bool, args []string)) {
	all := map[string]func(ts *testscript.TestScript, neg bool, args []string){"status": status}
	for name, fn := range cmds {
		all[name] = fn
	}
	testscript.Run(t, testscript.Params{Dir: "testdata", Cmds: all, Condition: condition})
}

// condition adds "[root]" to testscript's conditions: the test runs as
// root (for -u/--user).
func condition(cond string) (bool, error) {
	if cond == "root" {
		return os.Geteuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

func status(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: status N COMMAND [ARG ...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status: %q is not an exit status", args[0])
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}
