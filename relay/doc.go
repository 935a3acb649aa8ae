// Package relay is the client-site relay: run by halite-agent when its
// config has a relay: section, beside the agent's own session, it listens
// for device agents on the site network and carries their sessions to the
// master over one upstream QUIC link that it dials (nothing dials into the
// site). The master sends each job once per relay; the relay matches its
// devices with the targets package and fans the signed job out. Devices'
// returns and events, MAC-tagged with a key agreed end to end with the
// master, go up unchanged, batched: a batcher per link (batch.go) appends
// every device's to one protocol.Batch, written on the link's control
// stream when it holds relay: batch_max bytes or batch_delay ms after its
// first item (with a master older than capability 6, each goes on its
// device's stream of the link instead). The master's acks come back down
// each device's stream, so a device forgets an item only once the master
// stored it; the relay forwards them with the device's next job, or after
// two seconds. While the master is away the relay keeps its devices
// connected and holds what they send on disk (an append-only log under
// cachedir/relay-spool, bounded by spool_max, the oldest dropped first and
// counted; memory holds only an index; the devices' own spools are the
// durable copy), then replays their Hellos, which resume the same
// sessions, and sends each device's held items, in order, before anything
// new. A relay restarted while the master is unreachable still has what
// its devices sent before it stopped: once the link is back it resumes
// each such device's session with the Hello it kept, and delivers it even
// if the device never returns (what it cannot, it counts as dropped). It
// admits devices at relay: admit a second (a handshake over the rate is
// refused before any crypto), limits each device's rate and drops a device
// that sends what it may not, without anyone else noticing.
//
// The relay is also the agent of its proxy minions (relay: proxy:,
// proxies.go, relay/proxy): site devices that cannot run the agent, each
// with a session of its own on the link under a key the relay holds for
// it, marked proxied by the relay on the master.
//
// The relay can delay or drop, never forge or impersonate a device's
// agent: see "Relays" in docs/ARCHITECTURE.md and the package comment of
// protocol. Its proxy minions' returns are its own word.
package relay
