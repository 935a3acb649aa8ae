package discovery

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/config"
)

const (
	// maxHandled is the packets a second each method decodes, at most:
	// past it the method stops reading until its budget is back.
	maxHandled = 2000
	// eventsPerSecond bounds the discovery events sent upstream.
	eventsPerSecond = 100
	// saveEvery is how often a changed inventory is written to disk.
	saveEvery = 30 * time.Second
)

// Options are what a Discoverer needs from its relay.
type Options struct {
	Config *config.Discovery
	Relay  string // the relay's id, in the event tags
	Dir    string // where the inventory is kept (cachedir/discovery)
	Log    *zap.Logger
	// Event sends an event as the relay's own agent; nil: none.
	Event func(tag string, data map[string]any) error
	// Managed returns the addresses of the relay's accepted devices and
	// their ids; nil: none.
	Managed func() map[netip.Addr]string
}

// Stats are a Discoverer's counters.
type Stats struct {
	Devices   int    // records in the inventory
	Full      uint64 // devices not recorded because the inventory was full, ever
	ARPSent   uint64 // ARP requests sent, ever
	Sweeps    uint64 // ARP sweeps finished, ever
	Probes    uint64 // WS-Discovery, mDNS and SSDP queries sent, ever
	Handled   uint64 // packets decoded, ever
	OverRate  uint64 // times a method stopped reading for its budget, ever
	Rejected  uint64 // answers refused (malformed, not related to a probe), ever
	Events    uint64 // events sent, ever
	LastSweep SweepStats
}

// SweepStats describe the last ARP sweep.
type SweepStats struct {
	Packets  int
	Duration time.Duration
}

// Discoverer runs the configured methods and keeps the inventory.
type Discoverer struct {
	o     Options
	c     *config.Discovery
	log   *zap.Logger
	inv   *inventory
	pace  *pacer
	neigh neighbours

	arpSent, sweeps, probes, handled, overRate, rejected, events atomic.Uint64

	mu        sync.Mutex
	lastSweep SweepStats
}

// New checks the options; Run starts the methods.
func New(o Options) (*Discoverer, error) {
	if o.Config == nil || o.Log == nil {
		return nil, errors.New("discovery: config and logger are required")
	}
	if len(o.Config.Methods()) == 0 {
		return nil, errors.New("discovery: no method")
	}
	c := o.Config
	return &Discoverer{o: o, c: c, log: o.Log, inv: newInventory(c.MaxDevices), pace: newPacer(c.PacketsPerSecond)}, nil
}

func (d *Discoverer) path() string { return filepath.Join(d.o.Dir, "inventory.cbor") }

// Run runs the methods until ctx ends; it returns once they all stopped,
// after saving the inventory. A method that cannot start (no CAP_NET_RAW,
// a port taken) is logged once and left out: it is no reason to stop the
// relay.
func (d *Discoverer) Run(ctx context.Context) error {
	if d.o.Dir != "" {
		if err := os.MkdirAll(d.o.Dir, 0o700); err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		if err := d.inv.load(d.path()); err != nil {
			d.log.Warn("discovery inventory not read: starting empty", zap.Error(err))
		}
	}
	n, _ := d.inv.stats()
	d.log.Info("discovery started", zap.Strings("methods", d.c.Methods()), zap.Int("devices", n),
		zap.Int("packets_per_second", d.c.PacketsPerSecond), zap.Int("max_devices", d.c.MaxDevices))
	g, gctx := errgroup.WithContext(ctx)
	if m := d.c.ARP; m != nil {
		g.Go(func() error { return d.quiet("arp", d.runARP(gctx, m)) })
	}
	if m := d.c.ONVIF; m != nil {
		g.Go(func() error { return d.quiet("onvif", d.runWSD(gctx, m)) })
	}
	if m := d.c.SSDP; m != nil {
		g.Go(func() error { return d.quiet("ssdp", d.runSSDP(gctx, m)) })
	}
	if m := d.c.MDNS; m != nil {
		g.Go(func() error { return d.quiet("mdns", d.runMDNS(gctx, m)) })
	}
	g.Go(func() error { return d.tickLoop(gctx) })
	err := g.Wait()
	if d.o.Dir != "" {
		if serr := d.inv.save(d.path()); serr != nil {
			d.log.Warn("discovery", zap.Error(serr))
		}
	}
	return err
}

// quiet logs a method's error and drops it: the other methods and the
// relay go on.
func (d *Discoverer) quiet(method string, err error) error {
	if err != nil {
		d.log.Warn("discovery method stopped", zap.String("method", method), zap.Error(err))
	}
	return nil
}

// tickLoop sends the events due, at most eventsPerSecond a second, and
// saves the inventory when it changed.
func (d *Discoverer) tickLoop(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	lastSave := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		d.tick(time.Now())
		if d.o.Dir != "" && time.Since(lastSave) >= saveEvery {
			lastSave = time.Now()
			if err := d.inv.save(d.path()); err != nil {
				d.log.Warn("discovery", zap.Error(err))
			}
		}
	}
}

// tick forgets the devices unseen for gone_after, updates which are
// managed and sends the events due.
func (d *Discoverer) tick(now time.Time) {
	var managed map[netip.Addr]string
	if d.o.Managed != nil {
		managed = d.o.Managed()
	}
	for _, c := range d.inv.tick(now.Add(-time.Duration(d.c.GoneAfter)*time.Second), managed, eventsPerSecond) {
		d.events.Add(1)
		if d.o.Event == nil {
			continue
		}
		if err := d.o.Event("halite/relay/"+d.o.Relay+"/discovery/"+c.what, c.data); err != nil {
			d.log.Warn("discovery event", zap.String("what", c.what), zap.Error(err))
		}
	}
}

// List returns the inventory, by key.
func (d *Discoverer) List() []Record { return d.inv.list() }

// Stats returns the counters now.
func (d *Discoverer) Stats() Stats {
	n, full := d.inv.stats()
	d.mu.Lock()
	last := d.lastSweep
	d.mu.Unlock()
	return Stats{Devices: n, Full: full, ARPSent: d.arpSent.Load(), Sweeps: d.sweeps.Load(), Probes: d.probes.Load(),
		Handled: d.handled.Load(), OverRate: d.overRate.Load(), Rejected: d.rejected.Load(), Events: d.events.Load(), LastSweep: last}
}

// see records a sighting, its MAC from the kernel's neighbour table when
// the method did not see one.
func (d *Discoverer) see(s sighting) {
	if s.mac == nil && s.ip.IsValid() {
		s.mac = d.neigh.lookup(s.ip)
	}
	d.inv.see(s, time.Now())
}

// interfaces returns the interfaces a method uses: those it names, else
// every interface that is up, not loopback and has an IPv4 address.
func interfaces(names []string) ([]net.Interface, error) {
	if len(names) > 0 {
		out := make([]net.Interface, 0, len(names))
		for _, n := range names {
			ifi, err := net.InterfaceByName(n)
			if err != nil {
				return nil, fmt.Errorf("interface %s: %w", n, err)
			}
			out = append(out, *ifi)
		}
		return out, nil
	}
	all, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []net.Interface
	for _, ifi := range all {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		if len(ipv4Prefixes(&ifi)) > 0 {
			out = append(out, ifi)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no interface is up with an IPv4 address")
	}
	return out, nil
}

// ipv4Prefixes returns an interface's IPv4 addresses with their networks.
func ipv4Prefixes(ifi *net.Interface) []netip.Prefix {
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok || !ip.Unmap().Is4() {
			continue
		}
		bits, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), bits))
	}
	return out
}

// pacer spaces the probes the relay sends: packets_per_second, shared by
// every method.
type pacer struct {
	mu   sync.Mutex
	next time.Time
	gap  time.Duration
}

func newPacer(pps int) *pacer { return &pacer{gap: time.Second / time.Duration(pps)} }

// wait returns when the next packet may go (or ctx ended: false). A
// timer cannot sleep much less than a millisecond, so a wait shorter than
// that is not slept: the packets go a little early in small bursts and
// the rate over a sweep is the one set.
func (p *pacer) wait(ctx context.Context) bool {
	p.mu.Lock()
	now := time.Now()
	// Behind by more than a moment (an idle pacer): start again from
	// now, so that idle time never adds a burst.
	if p.next.Before(now.Add(-max(8*p.gap, 20*time.Millisecond))) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.gap)
	p.mu.Unlock()
	d := time.Until(at)
	if d < time.Millisecond {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// budget is a method's decoding budget: maxHandled packets a second.
type budget struct {
	start time.Time
	n     int
}

// take spends one packet; when the second's budget is spent it waits for
// the next second (not reading: the kernel drops what its socket buffer
// cannot hold) and reports it in over.
func (b *budget) take(ctx context.Context, over *atomic.Uint64) bool {
	now := time.Now()
	if now.Sub(b.start) >= time.Second {
		b.start, b.n = now, 0
	}
	if b.n < maxHandled {
		b.n++
		return true
	}
	over.Add(1)
	t := time.NewTimer(time.Second - now.Sub(b.start))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	b.start, b.n = time.Now(), 1
	return true
}

// neighbours reads the kernel's IPv4 neighbour table (/proc/net/arp),
// at most once a second, for the MAC of a device heard from over UDP.
type neighbours struct {
	mu   sync.Mutex
	at   time.Time
	macs map[netip.Addr]net.HardwareAddr
}

// maxNeighbours bounds the neighbour table read.
const maxNeighbours = 1 << 16

func (n *neighbours) lookup(ip netip.Addr) net.HardwareAddr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if mac, ok := n.macs[ip]; ok {
		return mac
	}
	if time.Since(n.at) < time.Second {
		return nil
	}
	n.at = time.Now()
	n.macs = readNeighbours("/proc/net/arp")
	return n.macs[ip]
}

func readNeighbours(path string) map[netip.Addr]net.HardwareAddr {
	out := map[netip.Addr]net.HardwareAddr{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < maxNeighbours {
		// IP address  HW type  Flags  HW address  Mask  Device
		fl := strings.Fields(sc.Text())
		if len(fl) < 4 || fl[2] == "0x0" {
			continue
		}
		ip, err := netip.ParseAddr(fl[0])
		mac, merr := net.ParseMAC(fl[3])
		if err != nil || merr != nil || len(mac) != 6 || isZero(mac) {
			continue
		}
		out[ip] = mac
	}
	return out
}

func isZero(mac net.HardwareAddr) bool {
	for _, b := range mac {
		if b != 0 {
			return false
		}
	}
	return true
}

// Find returns the inventory's record of the device with MAC mac (any
// case, "" for none) or, when mac is "", the one that has address ip.
func (d *Discoverer) Find(mac string, ip netip.Addr) (Record, bool) {
	return d.inv.find(mac, ip)
}
