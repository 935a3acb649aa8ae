// Package reactor is Salt's reactor for Halite: it maps event tags to SLS
// files (the `reactor:` option), renders the files that match an event and
// hands the reactions they define to a dispatcher on a worker pool.
//
// The same engine serves the master (local, runner and wheel reactions,
// see master/reactor.go) and a masterless agent (caller reactions, see
// agent/reactor.go). It sits between the event bus and the parts that act:
// it imports event and render/sls, never master or agent, and takes its
// renderer as an interface so that the default agent build carries no
// Jinja engine.
//
// Nothing is lost silently: matching runs on the reader of a bounded bus
// subscription and only queues work; a full work queue (reactor_worker_hwm)
// or a lagging subscription is counted, logged and fired as
// halite/reactor/overflow; a file that fails to render is logged with file,
// line and tag and fired as halite/reactor/render_error; a reaction refused
// by the loop guard is fired as halite/reactor/loop.
package reactor
