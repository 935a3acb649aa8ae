// Package master is the Halite master: it listens for agents and relays on
// QUIC, decides on their keys (package keys), publishes signed jobs to them,
// keeps what they return in the job cache (package jobcache), fires Salt's
// events on its event bus, and serves the operator CLIs on its local unix
// socket (package api) with runners and wheel functions.
//
// Goroutines: Run starts the QUIC accept loop, one goroutine pair per agent
// connection (reader and writer), the local API accept loop with one
// goroutine per CLI request, and the housekeeping loops (job cache
// retention, presence events). Run returns only after all of them exited.
package master
