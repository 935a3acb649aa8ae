// Package master is the Halite master: it listens for agents and relays on
// QUIC, decides on their keys, publishes signed jobs to them, keeps what
// they return, fires Salt's events on its event bus, and serves the
// operator CLIs on its local unix socket (package api) with runners and
// wheel functions.
//
// A Master is made of named parts. New builds them, and Run starts the
// long-running ones, by name and in this order:
//
//   - keys: the key store (package keys), with the bounds on new and
//     pending keys (newkeys.go, keywait.go). No loop: sessions and the
//     wheel ask it.
//   - job cache: the embedded job cache (package jobcache); cleanLoop
//     purges jobs older than keep_jobs.
//   - bus: the event bus (package event). No loop: every part fires on it,
//     the reactor, event_return, engines and state.event read it.
//   - sessions: runSessions accepts agents' and relays' connections
//     (agents.go, relays.go): one session per agent, a relay link per
//     relay with a session per device behind it, and the loops they rely
//     on (acknowledgements, presence events, returns held while the job
//     cache cannot store them, held.go).
//   - publisher: publish (publish.go) signs a job once and sends it to the
//     sessions and relays its target matches. No loop: it runs in its
//     callers (local API, reactor, runners, schedule).
//   - returners: the returner routing and its durable queues (package
//     retroute), fed by the publisher (each job's --return) and by the
//     sessions (each stored return), and reading the bus for event_return.
//   - reactor: the reactor: option's rules (reactor.go), reloaded on SIGHUP
//     and every reactor_refresh_interval.
//   - engines: the engines: option and the user engines under _engines/
//     (engines.go).
//   - schedule: the master's schedule: of runner calls (schedule.go).
//   - metrics: the Prometheus endpoint on metrics_port, off by default
//     (metrics.go).
//   - local API: the CLIs' unix socket (localapi.go): publish, runners
//     (runners*.go, with each part's own runners), wheel (wheel.go) and
//     state.event.
//
// Stopping: when Run's context ends, the QUIC listener and the socket
// close, then every session and relay link; each part returns once the
// goroutines it started have exited, Run waits for them and for every
// connection's goroutines, and closes the event bus and then the job cache
// last. A part that fails stops the master the same way, and Run returns
// its error.
package master
