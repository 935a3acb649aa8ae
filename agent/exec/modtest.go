package exec

import (
	"context"
	"time"
)

// modtestModule is the test functions of modtest.go: a table the linker lays out
// as data (required, optional and calls in it would make it init code).
var modtestModule = module{name: "test", funcs: []function{
	{
		name: "ping",
		doc: `Return True: the agent is up and answering jobs.

CLI Example:

    halite '*' test.ping`,
		run: func(context.Context, *call) (any, error) { return true, nil },
	},
	{
		name: "version",
		doc: `Return the version of Halite running on the agent.

CLI Example:

    halite '*' test.version`,
		run: func(_ context.Context, c *call) (any, error) { return c.e.version, nil },
	},
	{
		name:   "echo",
		params: []param{{name: "text", required: true}},
		doc: `Return the argument, unchanged.

CLI Example:

    halite '*' test.echo 'foo bar baz'`,
		run: func(_ context.Context, c *call) (any, error) { return c.arg("text"), nil },
	},
	{
		name:    "arg",
		varargs: true,
		varkw:   true,
		doc: `Return the positional and keyword arguments received, as
{"args": [...], "kwargs": {...}}. Useful to see how arguments are parsed.

CLI Example:

    halite '*' test.arg 1 "two" 3.1 txt="hello" wow='{a: 1, b: "hello"}'`,
		run: func(_ context.Context, c *call) (any, error) {
			return map[string]any{"args": c.rest, "kwargs": c.kw}, nil
		},
	},
	{
		name:   "sleep",
		params: []param{{name: "length", required: true}},
		doc: `Sleep for length seconds, then return True. The job's timeout and
saltutil.kill_job end it early.

CLI Example:

    halite '*' test.sleep 20`,
		run: testSleep,
	},
	{
		name:   "retcode",
		params: []param{{name: "code", def: 42}},
		doc: `Return True and set the job's retcode to code (default 42); a
non-zero code makes the job fail, for testing how failures are reported.

CLI Example:

    halite '*' test.retcode 3`,
		run: func(_ context.Context, c *call) (any, error) {
			n, ok := toInt(c.arg("code"))
			if !ok {
				return nil, invalidf("code must be an integer, not %v", c.arg("code"))
			}
			c.retcode = n
			return true, nil
		},
	},
}}

func init() { register(modtestModule) }

func testSleep(ctx context.Context, c *call) (any, error) {
	d, err := c.seconds("length")
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
