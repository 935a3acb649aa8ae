// Package exec is the agent's executor: it runs the execution modules
// (test.*, cmd.*, grains.*, sys.*, saltutil.*) for the jobs the agent
// receives, concurrently, each under its own timeout, and turns every outcome
// - a return, a bad argument, an unknown function, a panic, a kill - into a
// Salt-shaped Result instead of a crash.
//
// It sits in the agent between the connection to the master (which decodes
// jobs, calls Executor.Run and signs the Result into a return) and the
// device: modules read grains from package grains and run commands through
// /bin/sh. halite-call --local uses the same Executor with no master.
//
// A module is one file: a table of functions, each with its name, its
// documentation, its argument spec (Python-like positional parameters with
// defaults, *args, **kwargs) and a Go function, registered in init. The
// executor binds a job's args and kwargs to the spec the way Salt binds them
// to a Python function, so callers get Salt's messages for bad arguments.
package exec
