// Package udphop is a UDP forwarder that tests put where a WAN would be,
// between a relay and its master: peers send to its port, it forwards each
// datagram to the master (from one socket per peer address) and the
// answers back. Cut, it drops every datagram both ways, as an outage does,
// while both ends keep their sockets: QUIC sees silence, not an error.
package udphop

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Hop is a running forwarder.
type Hop struct {
	ln      *net.UDPConn
	to      *net.UDPAddr
	cut     atomic.Bool
	dropped atomic.Int64
	rate    atomic.Int64 // bytes a second from the master; 0: no limit

	paceMu sync.Mutex
	due    time.Time // when the pacer's last datagram is due

	mu     sync.Mutex
	flows  map[string]*net.UDPConn
	closed bool // no more flows
	wg     sync.WaitGroup
}

// Start starts a hop on a free loopback port to the master at to; the
// test's cleanup stops it.
func Start(t testing.TB, to string) *Hop {
	t.Helper()
	addr, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h := &Hop{ln: ln, to: addr, flows: map[string]*net.UDPConn{}}
	h.wg.Add(1)
	go h.forward()
	t.Cleanup(h.close)
	return h
}

// Addr is the address peers send to.
func (h *Hop) Addr() string { return h.ln.LocalAddr().String() }

// Port is Addr's port.
func (h *Hop) Port() int { return h.ln.LocalAddr().(*net.UDPAddr).Port }

// Cut drops every datagram from now on (true) or forwards them again.
func (h *Hop) Cut(cut bool) { h.cut.Store(cut) }

// SetRate limits what the master sends through the hop to bytesPerSecond
// (0: no limit), as a slow WAN does: datagrams wait their turn, and those
// that pile up past the sockets' buffers are lost.
func (h *Hop) SetRate(bytesPerSecond int64) { h.rate.Store(bytesPerSecond) }

// paceSlack is how far behind its schedule the pacer may fall and catch
// up (a burst of that long at the rate): a sleep ends late, by up to a
// millisecond or more on a loaded machine, and at megabytes a second a
// datagram's turn is a fraction of that. Without the slack every
// datagram's lateness is lost, and the rate achieved is a datagram per
// sleep, whatever the rate set.
const paceSlack = 20 * time.Millisecond

// pace holds a datagram of n bytes until its turn under the rate.
func (h *Hop) pace(n int) {
	r := h.rate.Load()
	if r <= 0 {
		return
	}
	h.paceMu.Lock()
	now := time.Now()
	if earliest := now.Add(-paceSlack); h.due.Before(earliest) {
		h.due = earliest
	}
	h.due = h.due.Add(time.Duration(int64(n) * int64(time.Second) / r))
	wait := h.due.Sub(now)
	h.paceMu.Unlock()
	if wait > 0 {
		time.Sleep(wait) // the link's pace, not a wait for a condition
	}
}

// Dropped is how many datagrams were dropped while cut.
func (h *Hop) Dropped() int64 { return h.dropped.Load() }

// forward carries datagrams from the peers to the master.
func (h *Hop) forward() {
	defer h.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := h.ln.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		if h.cut.Load() {
			h.dropped.Add(1)
			continue
		}
		h.mu.Lock()
		up, ok := h.flows[from.String()]
		if !ok {
			if h.closed {
				h.mu.Unlock()
				return
			}
			if up, err = net.DialUDP("udp", nil, h.to); err != nil {
				h.mu.Unlock()
				continue
			}
			h.flows[from.String()] = up
			h.wg.Add(1)
			go h.back(up, from)
		}
		h.mu.Unlock()
		up.Write(buf[:n])
	}
}

// back carries the master's datagrams on one flow back to its peer.
func (h *Hop) back(up *net.UDPConn, peer *net.UDPAddr) {
	defer h.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error (the master restarting): go on
		}
		h.pace(n)
		if h.cut.Load() {
			h.dropped.Add(1)
			continue
		}
		h.ln.WriteToUDP(buf[:n], peer)
	}
}

func (h *Hop) close() {
	h.ln.Close()
	h.mu.Lock()
	h.closed = true
	for _, c := range h.flows {
		c.Close()
	}
	h.mu.Unlock()
	h.wg.Wait()
}
