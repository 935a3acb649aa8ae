// Package discovery is the relay's inventory of its site network (the
// relay: discovery: section): which devices are there, who made them,
// what they say they are, and whether a Halite agent answers from them.
//
// Methods, each optional:
//   - arp: an ARP sweep of IPv4 subnets (each at most a /16) at
//     packets_per_second, and passive listening to the ARP traffic on the
//     interfaces, over a raw AF_PACKET socket (gopacket's pcapgo
//     EthernetHandle: pure Go, no cgo or libpcap), with a kernel filter
//     that lets only ARP through. It needs CAP_NET_RAW; without it the
//     relay says so once and goes on without ARP.
//   - onvif: WS-Discovery Probes (UDP multicast 239.255.255.250:3702)
//     for ONVIF devices; the ProbeMatches' XAddrs, Types and Scopes
//     (manufacturer, model, hardware, name, location) are recorded.
//   - mdns: multicast DNS queries (the DNS-SD service list and the
//     services cameras and network gear announce) and listening on
//     224.0.0.251:5353.
//   - ssdp: UPnP M-SEARCH and listening to NOTIFY announcements
//     (SERVER, LOCATION, USN, ST/NT).
//
// A record is a device by MAC (or by address until its MAC is known):
// its addresses, its vendor from the OUI (oui.go), what each method
// learnt, when it was first and last seen, and the id of the accepted
// agent whose relay session comes from one of its addresses. Changes go
// upstream as the relay's own events, halite/relay/<relay>/discovery/new,
// changed and gone, each carrying the whole record (gone: its key and
// addresses), through the relay's agent session, which spools them while
// the master is away; the master keeps the inventory from them
// (discovery.list). The inventory is saved under the relay's cachedir
// (discovery/inventory.cbor) and read back on start.
//
// Bounds, so that a spoofer on the site costs little: the inventory holds
// at most max_devices records (more are counted and dropped), a record's
// strings and lists have fixed bounds, each method handles at most
// maxHandled packets a second (past that it stops reading, and the
// kernel drops what does not fit its socket buffer), WS-Discovery answers
// must relate to one of the relay's recent probes, and events go at most
// eventsPerSecond a second (the rest wait their turn).
package discovery
