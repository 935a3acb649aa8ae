// Package agent is halite-agent, the program on every device: it connects
// to its master over QUIC (dialing out; nothing dials in), proves its
// identity, waits for its key to be accepted, then runs the master's signed
// jobs with its executor (package agent/exec) and sends back signed returns.
// It reports its grains (package agent/grains) and forwards events fired
// locally with halite-call. Returns and events made while the master is away
// wait in a bounded outbox and go out when it is back.
//
// The agent imports protocol, targets, config and event, never master or
// relay; deps_test.go in cmd/halite-agent keeps that true.
package agent
