package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"go.uber.org/zap"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/halite-fleet/halite/config"
)

// arpFilter lets only ARP frames through to the socket (tcpdump's
// "arp"): the kernel drops the rest of the traffic before it costs a read.
var arpFilter = func() []bpf.RawInstruction {
	raw, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(layers.EthernetTypeARP), SkipFalse: 1},
		bpf.RetConstant{Val: 128},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		panic("discovery: ARP filter: " + err.Error())
	}
	return raw
}()

// readTimeout bounds each read of the packet socket, so that the reader
// sees ctx end on a quiet network.
const readTimeout = 250 * time.Millisecond

// errNoRaw is a packet socket refused: the relay lacks CAP_NET_RAW.
var errNoRaw = errors.New("ARP discovery needs CAP_NET_RAW (setcap cap_net_raw+ep halite-agent, or AmbientCapabilities=CAP_NET_RAW): going on without ARP")

// arpPort is one interface's packet socket.
type arpPort struct {
	ifi  net.Interface
	h    *pcapgo.EthernetHandle
	fd   int // h's socket, for writes (pcapgo v1.1.19 reads only)
	mac  net.HardwareAddr
	nets []netip.Prefix // its IPv4 addresses
	mu   sync.Mutex     // writes
}

// openARP opens ifi's packet socket, with the ARP filter and a read
// timeout.
func openARP(ifi net.Interface) (*arpPort, error) {
	probe, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, errNoRaw
		}
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	unix.Close(probe)
	h, err := pcapgo.NewEthernetHandle(ifi.Name)
	if err != nil {
		return nil, fmt.Errorf("ARP on %s: %v", ifi.Name, err)
	}
	if err := h.SetBPF(arpFilter); err != nil {
		h.Close()
		return nil, fmt.Errorf("ARP filter on %s: %w", ifi.Name, err)
	}
	if err := h.SetCaptureLength(128); err != nil {
		h.Close()
		return nil, err
	}
	fd, err := handleFD(h)
	if err != nil {
		h.Close()
		return nil, err
	}
	tv := unix.NsecToTimeval(readTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		h.Close()
		return nil, fmt.Errorf("ARP on %s: read timeout: %w", ifi.Name, err)
	}
	mac := ifi.HardwareAddr
	if len(mac) != 6 {
		h.Close()
		return nil, fmt.Errorf("ARP on %s: not an Ethernet interface", ifi.Name)
	}
	return &arpPort{ifi: ifi, h: h, fd: fd, mac: mac, nets: ipv4Prefixes(&ifi)}, nil
}

// handleFD returns the handle's socket. pcapgo v1.1.19 (pinned in
// go.mod) reads with a blocking recvmsg and offers neither a deadline
// (closing the socket does not wake a blocked read) nor a write: both use
// the descriptor, its unexported field fd (TestHandleFD checks it is
// still there).
func handleFD(h *pcapgo.EthernetHandle) (int, error) {
	f := reflect.ValueOf(h).Elem().FieldByName("fd")
	if !f.IsValid() || f.Kind() != reflect.Int || f.Int() < 0 {
		return 0, errors.New("pcapgo.EthernetHandle has no fd field: gopacket changed")
	}
	return int(f.Int()), nil
}

// runARP listens on and sweeps the method's interfaces until ctx ends.
func (d *Discoverer) runARP(ctx context.Context, m *config.DiscoveryMethod) error {
	ifs, err := interfaces(m.Interfaces)
	if err != nil {
		return err
	}
	var ports []*arpPort
	defer func() {
		for _, p := range ports {
			p.h.Close()
		}
	}()
	for _, ifi := range ifs {
		p, err := openARP(ifi)
		if errors.Is(err, errNoRaw) {
			return err
		}
		if err != nil {
			d.log.Warn("discovery: ARP left out on an interface", zap.String("interface", ifi.Name), zap.Error(err))
			continue
		}
		ports = append(ports, p)
	}
	if len(ports) == 0 {
		return errors.New("ARP: no interface could be opened")
	}
	plan := d.sweepPlan(ports, m)
	var wg sync.WaitGroup
	for _, p := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.readARP(ctx, p, m.Passive)
		}()
	}
	if m.Active && len(plan) > 0 {
		d.every(ctx, func() { d.sweep(ctx, plan) })
	}
	wg.Wait()
	return nil
}

// every runs f now and then every interval until ctx ends.
func (d *Discoverer) every(ctx context.Context, f func()) {
	t := time.NewTicker(time.Duration(d.c.Interval) * time.Second)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepTarget is one subnet and the port and source address it is swept
// from.
type sweepTarget struct {
	port *arpPort
	net  netip.Prefix
	src  netip.Addr
}

// sweepPlan places each subnet on the port with an address in it (else
// the first port); without subnets, the ports' own networks, those larger
// than a /16 left out.
func (d *Discoverer) sweepPlan(ports []*arpPort, m *config.DiscoveryMethod) []sweepTarget {
	var plan []sweepTarget
	if len(m.Subnets) == 0 {
		for _, p := range ports {
			for _, n := range p.nets {
				if n.Bits() < config.MinDiscoveryPrefix {
					d.log.Warn("discovery: not sweeping a network larger than a /16 (set arp: subnets)", zap.Stringer("net", n), zap.String("interface", p.ifi.Name))
					continue
				}
				plan = append(plan, sweepTarget{p, n.Masked(), n.Addr()})
			}
		}
		return plan
	}
	for _, sub := range m.Subnets {
		t := sweepTarget{net: sub}
		for _, p := range ports {
			for _, n := range p.nets {
				if sub.Contains(n.Addr()) || n.Contains(sub.Addr()) {
					t.port, t.src = p, n.Addr()
					break
				}
			}
			if t.port != nil {
				break
			}
		}
		if t.port == nil {
			t.port = ports[0]
			if len(ports[0].nets) > 0 {
				t.src = ports[0].nets[0].Addr()
			} else {
				t.src = netip.IPv4Unspecified()
			}
		}
		plan = append(plan, t)
	}
	return plan
}

// sweep sends an ARP request to every address of the plan's subnets,
// paced at packets_per_second.
func (d *Discoverer) sweep(ctx context.Context, plan []sweepTarget) {
	start := time.Now()
	sent := 0
	for _, t := range plan {
		frame := arpRequest(t.port.mac, t.src)
		first, last := t.net.Addr(), lastAddr(t.net)
		if t.net.Bits() <= 30 {
			first, last = first.Next(), last.Prev() // not the network's nor its broadcast
		}
		for a := first; a.IsValid() && a.Compare(last) <= 0; a = a.Next() {
			if a == t.src {
				continue
			}
			if !d.pace.wait(ctx) {
				return
			}
			b := a.As4()
			copy(frame[38:42], b[:])
			t.port.mu.Lock()
			_, err := unix.Write(t.port.fd, frame)
			t.port.mu.Unlock()
			if err != nil {
				d.log.Warn("discovery: ARP sweep stopped", zap.String("interface", t.port.ifi.Name), zap.Error(err))
				return
			}
			sent++
			d.arpSent.Add(1)
		}
	}
	took := time.Since(start)
	d.sweeps.Add(1)
	d.mu.Lock()
	d.lastSweep = SweepStats{Packets: sent, Duration: took}
	d.mu.Unlock()
	n, full := d.inv.stats()
	d.log.Info("discovery: ARP sweep done", zap.Int("packets", sent), zap.Duration("took", took),
		zap.Float64("packets_per_second", float64(sent)/took.Seconds()), zap.Int("devices", n), zap.Uint64("full", full))
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// arpRequest builds a broadcast ARP request from mac and src; the target
// address is bytes 38 to 41.
func arpRequest(mac net.HardwareAddr, src netip.Addr) []byte {
	s := src.As4()
	eth := layers.Ethernet{SrcMAC: mac, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: mac, SourceProtAddress: s[:],
		DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 4)}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &eth, &arp); err != nil {
		panic("discovery: ARP request: " + err.Error()) // fixed sizes: cannot fail
	}
	return buf.Bytes()
}

// readARP records the senders of the ARP frames seen on p: the replies
// to the sweep and, if passive, every request and announcement.
func (d *Discoverer) readARP(ctx context.Context, p *arpPort, passive bool) {
	var eth layers.Ethernet
	var arp layers.ARP
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &arp)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 2)
	var b budget
	for ctx.Err() == nil {
		data, _, err := p.h.ZeroCopyReadPacketData()
		if err != nil {
			continue // the read timeout (or a transient error): look at ctx again
		}
		if !b.take(ctx, &d.overRate) {
			return
		}
		if err := parser.DecodeLayers(data, &decoded); err != nil || len(decoded) < 2 {
			d.rejected.Add(1)
			continue
		}
		d.handled.Add(1)
		if arp.AddrType != layers.LinkTypeEthernet || arp.Protocol != layers.EthernetTypeIPv4 ||
			len(arp.SourceHwAddress) != 6 || len(arp.SourceProtAddress) != 4 {
			d.rejected.Add(1)
			continue
		}
		if !passive && arp.Operation != layers.ARPReply {
			continue
		}
		mac := net.HardwareAddr(arp.SourceHwAddress)
		if mac[0]&1 != 0 || isZero(mac) || string(mac) == string(p.mac) {
			continue // multicast, none, or the relay's own
		}
		ip := netip.AddrFrom4([4]byte(arp.SourceProtAddress))
		if ip.IsUnspecified() || ip.IsMulticast() || ip.IsLoopback() {
			ip = netip.Addr{} // an ARP probe (RFC 5227): the MAC only
		}
		d.see(sighting{mac: append(net.HardwareAddr(nil), mac...), ip: ip, method: "arp"})
	}
}
