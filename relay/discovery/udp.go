package discovery

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// maxDatagram is the largest answer read; a larger one is refused.
const maxDatagram = 16 << 10

// udpPort is a UDP socket of one method, on its interfaces.
type udpPort struct {
	c   *net.UDPConn
	p   *ipv4.PacketConn
	ifs []net.Interface
}

// openUDP binds port (0: any) on every address, shared with other
// programs (SO_REUSEADDR, SO_REUSEPORT: an mDNS responder on the relay's
// host keeps 5353) and, if group is valid, joins it on each interface.
func openUDP(port int, group netip.Addr, ifs []net.Interface) (*udpPort, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, err
	}
	c := pc.(*net.UDPConn)
	u := &udpPort{c: c, p: ipv4.NewPacketConn(c), ifs: ifs}
	if err := u.p.SetMulticastTTL(1); err != nil {
		c.Close()
		return nil, err
	}
	_ = u.p.SetMulticastLoopback(false)
	if group.IsValid() {
		joined := 0
		for i := range ifs {
			if err := u.p.JoinGroup(&ifs[i], &net.UDPAddr{IP: group.AsSlice()}); err == nil {
				joined++
			}
		}
		if joined == 0 {
			c.Close()
			return nil, fmt.Errorf("could not join %s on any interface", group)
		}
	}
	return u, nil
}

// send sends b to dst out of each interface, paced.
func (d *Discoverer) send(ctx context.Context, u *udpPort, dst netip.AddrPort, b []byte) error {
	var last error
	ok := 0
	for i := range u.ifs {
		if !d.pace.wait(ctx) {
			return nil
		}
		if err := u.p.SetMulticastInterface(&u.ifs[i]); err != nil {
			last = err
			continue
		}
		if _, err := u.c.WriteToUDPAddrPort(b, dst); err != nil {
			last = err
			continue
		}
		ok++
		d.probes.Add(1)
	}
	if ok == 0 && last != nil {
		return last
	}
	return nil
}

// readUDP hands each datagram read from u to handle, within the method's
// budget, until ctx ends.
func (d *Discoverer) readUDP(ctx context.Context, u *udpPort, handle func(src netip.Addr, b []byte)) {
	buf := make([]byte, maxDatagram)
	var b budget
	for ctx.Err() == nil {
		_ = u.c.SetReadDeadline(time.Now().Add(readTimeout))
		n, src, err := u.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !b.take(ctx, &d.overRate) {
			return
		}
		if n == len(buf) {
			d.rejected.Add(1)
			continue
		}
		d.handled.Add(1)
		handle(src.Addr().Unmap(), buf[:n])
	}
}

// uuid returns a random RFC 4122 version 4 UUID.
func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
