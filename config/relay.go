package config

import (
	"errors"
	"fmt"
	"net/netip"
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
	// DeviceTimeout is how long, in seconds, the relay keeps a device
	// that has sent nothing: its QUIC idle timeout (default 30, 5 to 600;
	// quic-go, the agent's QUIC, takes no idle timeout under 5 s from its
	// peer). A device keeps an idle session alive with a keep-alive every
	// half of it, so it also sets the idle traffic of a site: one PING and
	// its ACK per device every 15 s by default.
	DeviceTimeout int
	// GCPercent is the Go collector's GOGC for the process while it runs a
	// relay (default 50, 10 to 400; GOGC in the environment wins): how
	// much the heap may grow over what is live before a collection. A
	// relay's heap is mostly its devices' connections, alive for hours,
	// and the headroom over them is most of its memory per device: at 50
	// it is about 0.8 times what Go's 100 gives, for about 2 % more CPU
	// (docs/BENCHMARKS.md).
	GCPercent int
	// Admit is how many devices a second the relay lets in (default
	// 2000): it bounds both the devices' QUIC handshakes (past it a device
	// is refused at once, before any crypto, and tries again after a short
	// random pause) and the device sessions it opens on its upstream link,
	// so that a reconnect storm reaches the relay and the master at a
	// bounded rate. At most Admit/2 handshakes (at least 16) are in
	// progress at once: a device's first packet past that is dropped, as
	// if lost, and its QUIC sends it again (so a relay slower than its
	// rate finishes the handshakes it begins).
	Admit int
	// BatchMax and BatchDelay bound the batches in which the relay sends
	// its devices' returns and events to a master that takes them
	// (capability 6): a batch goes when it holds BatchMax bytes (default
	// 64 KiB, 1 KiB to MaxRelayBatch) or BatchDelay milliseconds after its
	// first item (default 5; 0 sends what is there at once, still batching
	// what arrives while the previous batch is being written).
	BatchMax   int
	BatchDelay int
	// ChunkCacheDir and ChunkCacheBytes are the relay's cache of file
	// chunks by hash (salt:// files, agent builds): a chunk that a device
	// asks for is fetched from the master once and served to the site's
	// other devices from here. ChunkCacheDir defaults to
	// cachedir/relay-chunks; ChunkCacheBytes bounds its disk (least
	// recently used chunks go first; default 1 GiB, 0: no cache, every
	// chunk is asked of the master, still once for devices asking at once).
	ChunkCacheDir   string
	ChunkCacheBytes int
	// Discovery is the relay: discovery: section (relay/discovery): what
	// the relay inventories on its site network. nil: no discovery.
	Discovery *Discovery
	// Proxies are the relay: proxy: list: proxy minions the relay runs
	// for site devices that cannot run the agent (relay/proxy).
	Proxies []Proxy
	// ProxyDynamicMax bounds the run-time proxy minions the master may
	// add to the relay (runner proxy.add, kept in
	// cachedir/relay-proxies.cbor); default 256, 0: none.
	ProxyDynamicMax int
}

// Proxy is one entry of the relay's proxy: list: a proxy minion the relay
// speaks for. Its credentials come from the entry (password, key_file) or,
// better, from the relay's own pillar, sealed to the relay by the master
// (password_pillar: a colon path into it, read at each call).
type Proxy struct {
	ID        string // the proxy minion's id (required)
	ProxyType string // ssh, onvif or http (required)
	Host      string // ssh, onvif: the device's address (host or IP)
	Port      int    // ssh: default 22; onvif: default 80
	URL       string // http: the device's base URL; onvif: the device service URL (instead of host/port)
	Username  string
	Password  string
	// PasswordPillar is a colon path into the relay's pillar
	// (proxy:cam7:password) that holds the password; it wins over
	// Password when the pillar has it.
	PasswordPillar string
	KeyFile        string // ssh: a private key file (PEM, OpenSSH)
	// KnownHosts (ssh) is the known_hosts file the device's host key is
	// checked against (default pki_dir/proxy_known_hosts); a host seen
	// for the first time is recorded only with AcceptNewHostKey.
	KnownHosts       string
	AcceptNewHostKey bool
	// Timeout bounds one call to the device, in seconds (default 10); a
	// job's own timeout, when shorter, wins.
	Timeout int
	// HealthPath (http) is the path test.ping GETs (default /).
	HealthPath string
	// Grains are static grains added to the ones the device reports.
	Grains map[string]any
	// Line is the entry's line in the config file (errors at run time).
	Line int
}

// ProxyTypes are the proxy types a relay runs.
var ProxyTypes = []string{"ssh", "onvif", "http"}

// MaxProxies bounds the relay's proxy: list.
const MaxProxies = 1 << 14

// Discovery is the relay's discovery: section: the methods it finds
// devices with and the bounds of what that costs.
type Discovery struct {
	// Interval is the seconds between two active rounds (an ARP sweep,
	// WS-Discovery, mDNS and SSDP queries); the passive listeners run
	// all the time.
	Interval int
	// PacketsPerSecond bounds the probes the relay sends (an ARP
	// sweep of a /16 is 65,536 of them).
	PacketsPerSecond int
	// MaxDevices bounds the inventory: a device found past it is counted
	// and dropped.
	MaxDevices int
	// GoneAfter is the seconds a device may go unseen before it is
	// forgotten (the discovery/gone event).
	GoneAfter int
	// The methods; nil: off.
	ARP   *DiscoveryMethod
	ONVIF *DiscoveryMethod
	MDNS  *DiscoveryMethod
	SSDP  *DiscoveryMethod
}

// Methods names the methods that are on, in their documented order.
func (d *Discovery) Methods() []string {
	var out []string
	for _, m := range []struct {
		name string
		on   *DiscoveryMethod
	}{{"arp", d.ARP}, {"onvif", d.ONVIF}, {"mdns", d.MDNS}, {"ssdp", d.SSDP}} {
		if m.on != nil {
			out = append(out, m.name)
		}
	}
	return out
}

// DiscoveryMethod is one discovery method's options.
type DiscoveryMethod struct {
	// Interfaces are the network interfaces the method uses; none: every
	// interface that is up, has an IPv4 address and is not loopback.
	Interfaces []string
	// Subnets (arp only) are the IPv4 networks swept, each at most a
	// /16; none: the networks of the interfaces' own addresses (those
	// larger than a /16 are skipped).
	Subnets []netip.Prefix
	// Passive (arp only): record the ARP traffic seen; Active: sweep.
	Passive, Active bool
}

// MinDiscoveryPrefix is the largest subnet a sweep takes: a /16.
const MinDiscoveryPrefix = 16

// DefaultDiscovery returns the discovery: defaults (no method on).
func DefaultDiscovery() *Discovery {
	return &Discovery{Interval: 300, PacketsPerSecond: 200, MaxDevices: 4096, GoneAfter: 86400}
}

// MaxRelayDevices is the largest max_devices: the master's limit of
// device streams on one relay link.
const MaxRelayDevices = 1 << 14

// MinRelayBatch and MaxRelayBatch bound batch_max. A batch may exceed
// batch_max by its last item, which may be as large as a frame; the upper
// bound leaves protocol.DefaultMaxFrame (4 MiB) room for that.
const (
	MinRelayBatch = 1 << 10
	MaxRelayBatch = 1 << 20
)

// MaxRelayBatchDelay bounds batch_delay, in milliseconds: a longer delay
// only makes every return late.
const MaxRelayBatchDelay = 1000

// DefaultRelay returns the relay: defaults.
func DefaultRelay() *Relay {
	return &Relay{Interface: "0.0.0.0", Port: 4506, MaxDevices: 10000, SpoolMax: 64 << 20,
		EventRate: 100, EventBurst: 1000, Heartbeat: 60, Admit: 2000, DeviceTimeout: 30, GCPercent: 50,
		BatchMax: 64 << 10, BatchDelay: 5, ChunkCacheBytes: 1 << 30, ProxyDynamicMax: 256}
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
		return &Error{File: file, Line: al.line, Msg: key + ": " + al.msg}
	}
	return &Error{File: file, Line: line, Msg: fmt.Sprintf("%s: %v", key, err)}
}
