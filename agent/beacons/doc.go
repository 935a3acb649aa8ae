// Package beacons runs Salt's beacons on the agent: monitors evaluated every
// interval whose results become events tagged salt/beacon/<id>/<name>/[sub].
//
// It sits between the agent's configuration (the beacons: option, in Salt's
// shape: a map of beacon name to a list of one-key dicts) and the agent's
// event path: the Manager calls a Fire function the agent gives it, which
// puts each event on the agent's own bus and, when the agent has a master,
// in the outbox spool, so beacon events made while the master is away reach
// it later. The built-in beacons read /proc and /sys and use only the
// standard library and golang.org/x/sys, so they add little to the agent
// binary.
package beacons
