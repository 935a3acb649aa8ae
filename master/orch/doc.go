// Package orch is the master's orchestrate engine: it runs the low state
// of an orchestration SLS (compiled on the master by master/statecomp for
// the master minion, Salt's "<id>_master") on the master itself, as Salt's
// state.orchestrate runner does with a MasterMinion (salt/runners/state.py).
//
// Apply runs the chunks in package state's Sequence (Salt's call_chunks
// order: requisites first), checks require, watch, onfail and onchanges
// (and their _any and _all forms) as Salt's check_requisite does, and stops
// at a failed state with failhard. The state functions are Salt's
// master-side ones (salt/states/saltmod.py): salt.state, salt.function,
// salt.runner, salt.wheel and salt.wait_for_event, which publish jobs and
// call runners through the Master interface the master gives it, and the
// test states (salt/states/test.py). salt.state and salt.function with
// batch: run through package internal/batch, the same rolling batch as
// `halite -b`.
//
// It imports no agent code: the agent's engine (agent/state) runs device
// states; this one runs only the functions above, so it is small, and
// has no prereq, listen or parallel (a chunk that uses them fails with a
// clear comment).
package orch
