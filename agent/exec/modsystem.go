package exec

import (
	"context"
	"errors"
	osexec "os/exec"
	"regexp"
	"strconv"
	"strings"
)

// system.reboot after salt/modules/system.py: reboot(at_time=None) runs
// "shutdown -r <at_time or now>" and returns its output.

// atTime is what shutdown takes as its time and system.reboot passes on:
// now, minutes (5 or +5) or hh:mm. Anything else is refused, so an
// argument can never become an option of shutdown (-h would halt).
var atTime = regexp.MustCompile(`^(now|\+?[0-9]{1,6}|[0-9]{1,2}:[0-9]{2})$`)

// modsystemModule is the system functions of modsystem.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modsystemModule = module{name: "system", funcs: []function{
	{
		name:   "reboot",
		params: []param{{name: "at_time"}},
		doc: `Reboot the device: runs "shutdown -r now", or "shutdown -r <at_time>"
with at_time the wait in minutes (or hh:mm). On a device without shutdown
(BusyBox), runs "reboot" (with -d <seconds> for a wait in minutes). Returns
the command's output.

CLI Example:

    halite '*' system.reboot
    halite '*' system.reboot at_time=5`,
		run: systemReboot,
	},
}}

func init() { register(modsystemModule) }

func systemReboot(ctx context.Context, c *call) (any, error) {
	when := "now"
	if v := c.arg("at_time"); v != nil && v != false && v != "" && v != 0 {
		s, ok := toString(v)
		if !ok || !atTime.MatchString(s) {
			return nil, invalidf("at_time must be a number of minutes, +minutes, hh:mm or now, not %v", v)
		}
		when = s
	}
	argv := []string{"shutdown", "-r", when}
	if _, err := osexec.LookPath("shutdown"); err != nil {
		if _, rerr := osexec.LookPath("reboot"); rerr != nil {
			return nil, commandf("neither shutdown nor reboot is installed")
		}
		argv = []string{"reboot"}
		if when != "now" {
			m, err := strconv.Atoi(strings.TrimPrefix(when, "+"))
			if err != nil {
				return nil, invalidf("at_time %s needs shutdown; reboot takes minutes only", when)
			}
			argv = append(argv, "-d", strconv.Itoa(m*60))
		}
	}
	r, err := runArgv(ctx, c, argv)
	if err != nil {
		return nil, err
	}
	return r.stdout, nil
}

// runArgv runs a program without a shell as cmd.run does for a module
// (python_shell=False): output merged and stripped, the job's retcode set to
// the exit code. A program that is not installed is an error.
func runArgv(ctx context.Context, c *call, argv []string) (cmdResult, error) {
	bin, err := osexec.LookPath(argv[0])
	if err != nil {
		return cmdResult{}, commandf("Unable to run command %q: %s is not installed", strings.Join(argv, " "), argv[0])
	}
	cmd := osexec.CommandContext(ctx, bin, argv[1:]...)
	ownProcessGroup(cmd)
	cmd.WaitDelay = waitDelay
	out := &cappedBuffer{limit: maxOutput}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	var r cmdResult
	if cmd.Process != nil {
		r.pid = cmd.Process.Pid
	}
	if ctx.Err() != nil {
		return r, context.Cause(ctx)
	}
	var exitErr *osexec.ExitError
	switch {
	case err == nil, errors.Is(err, osexec.ErrWaitDelay), errors.As(err, &exitErr):
	default:
		return r, commandf("Unable to run command %q: %v", strings.Join(argv, " "), err)
	}
	r.retcode = exitCode(cmd.ProcessState)
	r.stdout = strings.TrimRight(out.text(), " \t\r\n\v\f")
	c.retcode = r.retcode
	return r, nil
}
