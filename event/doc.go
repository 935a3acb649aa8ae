// Package event is Halite's in-process event bus, shared by the master and
// by a masterless agent (the reactor, engines, returners and the local
// socket's state.event all hang off one Bus).
//
// Publish never blocks: every subscriber has a bounded queue, and an event
// that does not fit is dropped, counted (per subscription and on the bus)
// and reported in a rate-limited warning, so one slow subscriber can neither
// stall the bus nor grow memory without bound. Subscribers choose their
// events by tag glob (Subscribe, fnmatch semantics as in Salt's state.event
// tagmatch) or by tag prefix (SubscribePrefix, Salt's default get_event
// match type "startswith").
//
// The package also holds the Salt vocabulary that travels with events: the
// tag builders (salt/job/<jid>/new, salt/job/<jid>/ret/<id>, salt/auth, ...),
// ReservedForMaster for the tags an agent may not send, the _stamp format,
// and Salt-style 20-digit job ids (JIDGen, IsJID).
//
// It imports only zap and the targets package, so the static agent binary
// can carry it.
package event
