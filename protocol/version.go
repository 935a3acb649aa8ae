package protocol

// ALPN is the TLS application protocol of Halite's QUIC connections. It
// changes only when a peer of the previous version could not talk to this one.
const ALPN = "halite/1"

// CapabilityVersion is a number that grows by one for every compatible
// change of the protocol; peers tell each other theirs and use the smaller.
//
// History:
//
//	1: 2026-11-22: Hello, KeyStatus, Job, Return, Event, Grains, Ping, Pong, Error.
//	2: 2026-11-22: session MAC keys (Hello.KX, KeyStatus.KX); returns and
//	   events may carry an HMAC tag instead of an ed25519 signature.
//	3: 2026-11-22: Hello.Returners (the agent's return: option).
//	4: 2026-11-23: Ack; Return.Seq and Event.Seq: the master acknowledges
//	   the returns and events it stored, and the agent keeps them on disk
//	   until then.
//	5: 2026-11-23: relays. Hello.Pub and KeyStatus.MasterKey for a device's
//	   Hello forwarded by a relay, Job.IDs, a relay link (Hello.Relay, then
//	   one stream per device); the master's key agreement half is derived
//	   from its key and the agent's half (Identity.SessionKX), so a relay
//	   can resume a device's session after an upstream reconnect.
//	6: 2026-11-23: Batch: a relay sends its devices' returns and events
//	   batched on the link's control stream.
//	7: 2026-11-24: MineGet and MineData (mine.get from an agent);
//	   ReturnBody.Schedule (the schedule job a return is of). Mine data go
//	   to the master as events tagged "_minion_mine".
//	8: 2026-11-24: a pending key is told at once when decided: the master
//	   keeps a pending agent's stream open after its KeyStatus and sends
//	   a second KeyStatus when an operator (or the reactor) accepts or
//	   rejects the key; the agent keeps reading until its acceptance wait
//	   runs out. A relay does the same on a device's stream.
//	9: 2026-11-24: compound jobs: JobBody.Funs, FunArgs and FunKwargs
//	   (Salt's list "fun"); the agent returns a map keyed by function.
//	10: 2026-11-25: StateGet and StateJob (halite-call state.apply on a
//	   device with a master: the master compiles for the asking device
//	   and answers with a signed job); relays forward them, and MineGet
//	   and MineData, between a device and the master, and tell a device
//	   the smaller of the master's capability and their own.
//	11: 2026-11-26: BlobGet and BlobData: content-addressed chunks of the
//	   files a job names by Manifest (salt:// files, agent builds); a
//	   relay answers them from its chunk cache or asks the master once.
//	12: 2026-11-26: PillarGet and PillarData (types 20 and 21): an agent
//	   asks for its own pillar; the master answers with it sealed to the
//	   device's identity key (SealTo, purpose "pillar", the request's
//	   nonce as additional data); relays forward both unchanged.
//	13: 2026-11-26: sealed state jobs: a state job (published, or a
//	   StateJob) for an agent of capability 13 carries its compiled
//	   states in Kwarg "__sealed__", its content key sealed to each
//	   device it is for in "__keys__" (SealKwargs), not "__state__"; the
//	   CLI's pillar= is no longer in a state job's Kwarg. An older agent
//	   gets a state job only when no pillar went into its compile.
//	14: 2026-11-27: FileQuery and FileAnswer (types 18 and 19): an
//	   agent's cp.* functions ask the master about salt:// files (find,
//	   hash, list, dirs, dir, template) and get a master-signed answer
//	   (files by Manifest, fetched by chunks); relays forward both
//	   unchanged.
//	15: 2026-11-28: ProxyCtl and ProxyAnswer (types 22 and 23), on a
//	   relay link's control stream: the master asks a relay to add,
//	   remove or list run-time proxy minions (runners proxy.add,
//	   proxy.remove, proxy.list).
const CapabilityVersion = 15

// CapAck is the first CapabilityVersion whose masters send Ack: an agent
// talking to an older master drops an item from its outbox once written.
const CapAck = 4

// CapRelay is the first CapabilityVersion whose masters serve relay links.
const CapRelay = 5

// CapBatch is the first CapabilityVersion whose masters accept Batch on a
// relay link: a relay whose master is older sends each device's returns
// and events on the device's own stream of the link.
const CapBatch = 6

// CapMine is the first CapabilityVersion whose masters answer MineGet.
const CapMine = 7

// CapKeyNotify is the first CapabilityVersion whose masters may hold a
// pending agent's stream open and send a second KeyStatus once the key is
// decided, and whose agents (and relays) wait for it.
const CapKeyNotify = 8

// CapStateCall is the first CapabilityVersion whose masters answer
// StateGet and whose relays forward it.
const CapStateCall = 10

// CapBlob is the first CapabilityVersion whose masters answer BlobGet and
// whose relays answer or forward it.
const CapBlob = 11

// CapPillar is the first CapabilityVersion whose masters answer PillarGet
// and whose relays forward it.
const CapPillar = 12

// CapSealedState is the first CapabilityVersion whose agents open sealed
// state jobs.
const CapSealedState = 13

// CapFileQuery is the first CapabilityVersion whose masters answer
// FileQuery and whose relays forward it.
const CapFileQuery = 14

// CapProxyAdd is the first CapabilityVersion whose relays take ProxyCtl.
const CapProxyAdd = 15
