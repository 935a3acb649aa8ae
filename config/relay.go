package config

import (
	"errors"
	"fmt"
)

// Relay is an agent's relay: section. An agent with one is a relay: beside
// its own session with the master it listens for device agents on the site
// network and carries their sessions to the master over one upstream link.
type Relay struct {
	Interface  string // address to listen on for devices (default 0.0.0.0)
	Port       int    // UDP port (default 4506)
	MaxDevices int    // devices served at once (default 10000, at most 16384)
	// SpoolMax bounds, in bytes, the disk the relay uses to hold returns
	// and events until the master acknowledges them, all the while its
	// upstream link is down (cachedir/relay-spool, default 64 MiB); past
	// it the oldest are dropped and counted, and their devices send them
	// again from their own spools.
	SpoolMax int
	// EventRate and EventBurst limit each device's returns and events
	// (a token bucket, per second); past the burst the relay stops reading
	// the device until it is within its rate again (nothing is lost: QUIC
	// holds the device back and its agent keeps the rest in its spool).
	EventRate  int
	EventBurst int
	// Heartbeat is the interval in seconds of the relay's heartbeat event
	// (halite/relay/<id>/heartbeat); 0 turns it off. Default 60.
	Heartbeat int
	// Admit is how many device sessions per second the relay opens on its
	// upstream link, so that a reconnect storm reaches the master at a
	// bounded rate (default 2000).
	Admit int
}

// MaxRelayDevices is the largest max_devices: the master's limit of
// device streams on one relay link.
const MaxRelayDevices = 1 << 14

// DefaultRelay returns the relay: defaults.
func DefaultRelay() *Relay {
	return &Relay{Interface: "0.0.0.0", Port: 4506, MaxDevices: 10000, SpoolMax: 64 << 20,
		EventRate: 100, EventBurst: 1000, Heartbeat: 60, Admit: 2000}
}

// atLine is an option's error about one line inside its value.
type atLine struct {
	line int
	msg  string
}

func (e *atLine) Error() string { return e.msg }

// optionError places a setter's error at the line it names, else at the
// option's own line.
func optionError(file string, line int, key string, err error) *Error {
	var al *atLine
	if errors.As(err, &al) {
		return &Error{File: file, Line: al.line, Msg: "relay: " + al.msg}
	}
	return &Error{File: file, Line: line, Msg: fmt.Sprintf("%s: %v", key, err)}
}
