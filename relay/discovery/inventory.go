package discovery

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/protocol"
)

// Bounds of one record: whatever a device (or a spoofer) answers, a
// record holds at most this much.
const (
	maxString = 256 // bytes of one string
	maxIPs    = 8   // addresses of one device, the most recent kept
	maxList   = 16  // items of one list (scopes, types, services, ...)
)

// Record is one device found on the site network.
type Record struct {
	// Key is the MAC address ("aa:bb:cc:dd:ee:ff"), or "ip:<address>"
	// for a device heard from (WS-Discovery, mDNS, SSDP) whose MAC is
	// not known yet: once it is, the record moves under its MAC.
	Key       string    `cbor:"key"`
	MAC       string    `cbor:"mac,omitempty"`
	IPs       []string  `cbor:"ips,omitempty"` // most recent first
	Vendor    string    `cbor:"vendor,omitempty"`
	Methods   []string  `cbor:"methods,omitempty"` // how it was seen: arp, onvif, mdns, ssdp
	ONVIF     *ONVIF    `cbor:"onvif,omitempty"`
	MDNS      *MDNS     `cbor:"mdns,omitempty"`
	SSDP      *SSDP     `cbor:"ssdp,omitempty"`
	FirstSeen time.Time `cbor:"first_seen"`
	LastSeen  time.Time `cbor:"last_seen"`
	// Managed is the id of the Halite agent, accepted by the master,
	// whose relay session comes from one of the device's addresses; "":
	// none.
	Managed string `cbor:"managed,omitempty"`
}

// ONVIF is what a device's WS-Discovery ProbeMatch says.
type ONVIF struct {
	Endpoint     string   `cbor:"endpoint,omitempty"` // its EndpointReference (urn:uuid:...)
	XAddrs       []string `cbor:"xaddrs,omitempty"`   // its device service URLs
	Types        []string `cbor:"types,omitempty"`
	Scopes       []string `cbor:"scopes,omitempty"`
	Manufacturer string   `cbor:"manufacturer,omitempty"`
	Model        string   `cbor:"model,omitempty"`
	Hardware     string   `cbor:"hardware,omitempty"`
	Name         string   `cbor:"name,omitempty"`
	Location     string   `cbor:"location,omitempty"`
}

// MDNS is what a device answers over multicast DNS.
type MDNS struct {
	Names     []string `cbor:"names,omitempty"`     // its host names (name.local)
	Services  []string `cbor:"services,omitempty"`  // service types (_http._tcp)
	Instances []string `cbor:"instances,omitempty"` // service instances
	TXT       []string `cbor:"txt,omitempty"`       // key=value
}

// SSDP is what a device's SSDP (UPnP) answers and announcements say.
type SSDP struct {
	Server   string   `cbor:"server,omitempty"`
	Location string   `cbor:"location,omitempty"`
	USN      []string `cbor:"usn,omitempty"`
	Types    []string `cbor:"types,omitempty"` // ST and NT
}

// Map is the record as event data (and as discovery.list shows it).
func (r *Record) Map() map[string]any {
	m := map[string]any{"key": r.Key, "ips": strs(r.IPs), "methods": strs(r.Methods),
		"first_seen": r.FirstSeen.UTC().Format(time.RFC3339), "last_seen": r.LastSeen.UTC().Format(time.RFC3339),
		"managed": r.Managed != ""}
	if r.MAC != "" {
		m["mac"] = r.MAC
	}
	if r.Vendor != "" {
		m["vendor"] = r.Vendor
	}
	if r.Managed != "" {
		m["id"] = r.Managed
	}
	if o := r.ONVIF; o != nil {
		m["onvif"] = map[string]any{"endpoint": o.Endpoint, "xaddrs": strs(o.XAddrs), "types": strs(o.Types),
			"scopes": strs(o.Scopes), "manufacturer": o.Manufacturer, "model": o.Model, "hardware": o.Hardware,
			"name": o.Name, "location": o.Location}
	}
	if d := r.MDNS; d != nil {
		m["mdns"] = map[string]any{"names": strs(d.Names), "services": strs(d.Services), "instances": strs(d.Instances), "txt": strs(d.TXT)}
	}
	if s := r.SSDP; s != nil {
		m["ssdp"] = map[string]any{"server": s.Server, "location": s.Location, "usn": strs(s.USN), "types": strs(s.Types)}
	}
	return m
}

func strs(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// sighting is one thing heard about a device.
type sighting struct {
	mac    net.HardwareAddr // nil: unknown
	ip     netip.Addr       // invalid: none (an ARP probe from 0.0.0.0)
	method string
	onvif  *ONVIF
	mdns   *MDNS
	ssdp   *SSDP
}

// entry is a record and what is still to be announced about it.
type entry struct {
	Record
	Announced bool `cbor:"announced"` // its discovery/new event went
	changed   bool // a discovery/changed event is due
}

// change is an event due: new, changed or gone.
type change struct {
	what string // new, changed, gone
	data map[string]any
}

// inventory is the relay's bounded list of devices.
type inventory struct {
	max int
	mu  sync.Mutex
	rec map[string]*entry     // by key
	ip  map[netip.Addr]string // address -> key of the record that has it
	// gone are the keys forgotten and not announced yet (bounded by max).
	gone  []map[string]any
	full  uint64 // devices not recorded: the inventory was full
	dirty bool   // changed since it was saved
}

func newInventory(max int) *inventory {
	return &inventory{max: max, rec: make(map[string]*entry), ip: make(map[netip.Addr]string)}
}

// see records s at now. It reports false when s was a new device that did
// not fit.
func (inv *inventory) see(s sighting, now time.Time) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var e *entry
	if s.mac != nil {
		key := s.mac.String()
		e = inv.rec[key]
		if e == nil && s.ip.IsValid() {
			// A device known by its address only: it moves under its MAC.
			if old, ok := inv.rec[ipKey(s.ip)]; ok {
				inv.forget(old, "identified")
				old.Key, old.MAC, old.Vendor = key, key, Vendor(s.mac)
				old.changed = old.Announced
				old.Announced = false // announced anew under its MAC
				inv.rec[key] = old
				for _, a := range old.IPs {
					if p, err := netip.ParseAddr(a); err == nil {
						inv.ip[p] = key
					}
				}
				e = old
			}
		}
		if e == nil {
			if len(inv.rec) >= inv.max {
				inv.full++
				return false
			}
			e = &entry{Record: Record{Key: key, MAC: key, Vendor: Vendor(s.mac), FirstSeen: now}}
			inv.rec[key] = e
		}
	} else {
		if !s.ip.IsValid() {
			return true
		}
		if k, ok := inv.ip[s.ip]; ok {
			e = inv.rec[k]
		} else {
			if len(inv.rec) >= inv.max {
				inv.full++
				return false
			}
			e = &entry{Record: Record{Key: ipKey(s.ip), FirstSeen: now}}
			inv.rec[e.Key] = e
		}
	}
	e.LastSeen = now
	inv.dirty = true
	if s.ip.IsValid() {
		inv.addIP(e, s.ip)
	}
	if !slices.Contains(e.Methods, s.method) {
		e.Methods = append(e.Methods, s.method)
		sort.Strings(e.Methods)
		e.changed = true
	}
	if s.onvif != nil && !sameONVIF(e.ONVIF, s.onvif) {
		e.ONVIF, e.changed = s.onvif, true
	}
	if s.mdns != nil {
		if m := mergeMDNS(e.MDNS, s.mdns); m != nil {
			e.MDNS, e.changed = m, true
		}
	}
	if s.ssdp != nil {
		if m := mergeSSDP(e.SSDP, s.ssdp); m != nil {
			e.SSDP, e.changed = m, true
		}
	}
	return true
}

func ipKey(a netip.Addr) string { return "ip:" + a.String() }

// addIP gives a to e (taking it from the record that had it: an address
// is one device's at a time), most recent first, at most maxIPs.
func (inv *inventory) addIP(e *entry, a netip.Addr) {
	s := a.String()
	if len(e.IPs) > 0 && e.IPs[0] == s {
		return
	}
	if k, ok := inv.ip[a]; ok && k != e.Key {
		if o := inv.rec[k]; o != nil {
			o.IPs = slices.DeleteFunc(o.IPs, func(x string) bool { return x == s })
			o.changed = true
		}
	}
	had := slices.Contains(e.IPs, s)
	e.IPs = slices.DeleteFunc(e.IPs, func(x string) bool { return x == s })
	e.IPs = append([]string{s}, e.IPs...)
	if len(e.IPs) > maxIPs {
		for _, x := range e.IPs[maxIPs:] {
			if p, err := netip.ParseAddr(x); err == nil && inv.ip[p] == e.Key {
				delete(inv.ip, p)
			}
		}
		e.IPs = e.IPs[:maxIPs]
	}
	inv.ip[a] = e.Key
	if !had {
		e.changed = true
	}
}

// forget removes e and, if it was announced, queues its gone event.
// Under inv.mu.
func (inv *inventory) forget(e *entry, why string) {
	delete(inv.rec, e.Key)
	for _, x := range e.IPs {
		if p, err := netip.ParseAddr(x); err == nil && inv.ip[p] == e.Key {
			delete(inv.ip, p)
		}
	}
	inv.dirty = true
	if e.Announced && len(inv.gone) < inv.max {
		inv.gone = append(inv.gone, map[string]any{"key": e.Key, "mac": e.MAC, "ips": strs(e.IPs), "reason": why,
			"last_seen": e.LastSeen.UTC().Format(time.RFC3339)})
	}
}

// tick forgets the devices unseen since before cutoff, sets each record's
// managed id from managed (address -> agent id; nil: leave as is) and
// returns at most n events due, gone ones first.
func (inv *inventory) tick(cutoff time.Time, managed map[netip.Addr]string, n int) []change {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, e := range inv.rec {
		if e.LastSeen.Before(cutoff) {
			inv.forget(e, "unseen")
			continue
		}
		if managed != nil {
			id := ""
			for _, x := range e.IPs {
				if p, err := netip.ParseAddr(x); err == nil && managed[p] != "" {
					id = managed[p]
					break
				}
			}
			if id != e.Managed {
				e.Managed, e.changed, inv.dirty = id, true, true
			}
		}
	}
	var out []change
	for len(out) < n && len(inv.gone) > 0 {
		out = append(out, change{"gone", inv.gone[0]})
		inv.gone = inv.gone[1:]
	}
	if len(out) == n {
		return out
	}
	keys := make([]string, 0)
	for k, e := range inv.rec {
		if !e.Announced || e.changed {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(out) == n {
			break
		}
		e := inv.rec[k]
		what := "changed"
		if !e.Announced {
			what = "new"
		}
		e.Announced, e.changed, inv.dirty = true, false, true
		out = append(out, change{what, e.Map()})
	}
	return out
}

// list returns copies of the records, by key.
func (inv *inventory) list() []Record {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]Record, 0, len(inv.rec))
	for _, e := range inv.rec {
		out = append(out, e.Record)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (inv *inventory) stats() (n int, full uint64) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return len(inv.rec), inv.full
}

// savedInventory is the inventory's file.
type savedInventory struct {
	Version int      `cbor:"v"`
	Entries []*entry `cbor:"entries"`
}

// save writes the inventory to path if it changed since it was saved.
func (inv *inventory) save(path string) error {
	inv.mu.Lock()
	if !inv.dirty {
		inv.mu.Unlock()
		return nil
	}
	s := savedInventory{Version: 1, Entries: make([]*entry, 0, len(inv.rec))}
	for _, e := range inv.rec {
		c := *e
		s.Entries = append(s.Entries, &c)
	}
	inv.dirty = false
	inv.mu.Unlock()
	b, err := protocol.Marshal(&s)
	if err == nil {
		err = atomicfile.Write(path, b, 0o600)
	}
	if err != nil {
		inv.mu.Lock()
		inv.dirty = true
		inv.mu.Unlock()
		return fmt.Errorf("save discovery inventory: %w", err)
	}
	return nil
}

// maxInventoryFile bounds the inventory file read back: max_devices (at
// most 65,536) records of bounded size.
const maxInventoryFile = 64 << 20

// load reads the inventory saved at path (none: empty). Records past max
// and records that do not check out are dropped; every string and list is
// cut to its bound again.
func (inv *inventory) load(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("discovery inventory: %w", err)
	}
	if fi.Size() > maxInventoryFile {
		return fmt.Errorf("discovery inventory %s: %d bytes, more than %d", path, fi.Size(), maxInventoryFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("discovery inventory: %w", err)
	}
	var s savedInventory
	if err := protocol.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("discovery inventory %s: %w", path, err)
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, e := range s.Entries {
		if e == nil || len(inv.rec) >= inv.max || inv.rec[e.Key] != nil || !validKey(e.Key) {
			continue
		}
		clean(&e.Record)
		inv.rec[e.Key] = e
		for _, x := range e.IPs {
			if p, err := netip.ParseAddr(x); err == nil {
				inv.ip[p] = e.Key
			}
		}
	}
	return nil
}

func validKey(k string) bool {
	if a, ok := strings.CutPrefix(k, "ip:"); ok {
		_, err := netip.ParseAddr(a)
		return err == nil
	}
	_, err := net.ParseMAC(k)
	return err == nil
}

// clean cuts a record's strings and lists to their bounds.
func clean(r *Record) {
	r.MAC, r.Vendor, r.Managed = cut(r.MAC), cut(r.Vendor), cut(r.Managed)
	r.IPs, r.Methods = cutList(r.IPs, maxIPs), cutList(r.Methods, maxList)
	if o := r.ONVIF; o != nil {
		o.Endpoint, o.Manufacturer, o.Model, o.Hardware, o.Name, o.Location = cut(o.Endpoint), cut(o.Manufacturer), cut(o.Model), cut(o.Hardware), cut(o.Name), cut(o.Location)
		o.XAddrs, o.Types, o.Scopes = cutList(o.XAddrs, maxList), cutList(o.Types, maxList), cutList(o.Scopes, maxList)
	}
	if m := r.MDNS; m != nil {
		m.Names, m.Services, m.Instances, m.TXT = cutList(m.Names, maxList), cutList(m.Services, maxList), cutList(m.Instances, maxList), cutList(m.TXT, maxList)
	}
	if s := r.SSDP; s != nil {
		s.Server, s.Location = cut(s.Server), cut(s.Location)
		s.USN, s.Types = cutList(s.USN, maxList), cutList(s.Types, maxList)
	}
}

// cut bounds a string from a device: at most maxString bytes, valid UTF-8.
func cut(s string) string {
	if len(s) > maxString {
		s = s[:maxString]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	return s
}

// cutList bounds a list from a device: at most n items, each cut.
func cutList(l []string, n int) []string {
	if len(l) > n {
		l = l[:n]
	}
	for i := range l {
		l[i] = cut(l[i])
	}
	return l
}

// addList adds the items of add missing from l, up to maxList; it
// reports whether l changed.
func addList(l []string, add []string) ([]string, bool) {
	changed := false
	for _, s := range add {
		if len(l) >= maxList {
			break
		}
		if s != "" && !slices.Contains(l, s) {
			l = append(l, s)
			changed = true
		}
	}
	if changed {
		sort.Strings(l)
	}
	return l, changed
}

func sameONVIF(a, b *ONVIF) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Endpoint == b.Endpoint && a.Manufacturer == b.Manufacturer && a.Model == b.Model && a.Hardware == b.Hardware &&
		a.Name == b.Name && a.Location == b.Location && slices.Equal(a.XAddrs, b.XAddrs) && slices.Equal(a.Types, b.Types) && slices.Equal(a.Scopes, b.Scopes)
}

// mergeMDNS returns old with what add brings (nil: nothing new).
func mergeMDNS(old, add *MDNS) *MDNS {
	var m MDNS
	if old != nil {
		m = MDNS{Names: slices.Clone(old.Names), Services: slices.Clone(old.Services), Instances: slices.Clone(old.Instances), TXT: slices.Clone(old.TXT)}
	}
	var c [4]bool
	m.Names, c[0] = addList(m.Names, add.Names)
	m.Services, c[1] = addList(m.Services, add.Services)
	m.Instances, c[2] = addList(m.Instances, add.Instances)
	m.TXT, c[3] = addList(m.TXT, add.TXT)
	if c == [4]bool{} && old != nil {
		return nil
	}
	return &m
}

// mergeSSDP returns old with what add brings (nil: nothing new).
func mergeSSDP(old, add *SSDP) *SSDP {
	var m SSDP
	if old != nil {
		m = SSDP{Server: old.Server, Location: old.Location, USN: slices.Clone(old.USN), Types: slices.Clone(old.Types)}
	}
	changed := old == nil
	if add.Server != "" && add.Server != m.Server {
		m.Server, changed = add.Server, true
	}
	if add.Location != "" && add.Location != m.Location {
		m.Location, changed = add.Location, true
	}
	var c1, c2 bool
	m.USN, c1 = addList(m.USN, add.USN)
	m.Types, c2 = addList(m.Types, add.Types)
	if !changed && !c1 && !c2 {
		return nil
	}
	return &m
}

// find returns a copy of the record of MAC mac, or of the one holding ip.
func (inv *inventory) find(mac string, ip netip.Addr) (Record, bool) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if mac != "" {
		hw, err := net.ParseMAC(mac)
		if err != nil {
			return Record{}, false
		}
		e := inv.rec[hw.String()]
		if e == nil {
			return Record{}, false
		}
		r := e.Record
		r.IPs = append([]string(nil), e.IPs...)
		return r, true
	}
	if !ip.IsValid() {
		return Record{}, false
	}
	k, ok := inv.ip[ip]
	if !ok || inv.rec[k] == nil {
		return Record{}, false
	}
	r := inv.rec[k].Record
	r.IPs = append([]string(nil), r.IPs...)
	return r, true
}
