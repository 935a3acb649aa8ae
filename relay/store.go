package relay

import "sync"

// store holds what devices sent for the master and the master has not yet
// acknowledged: returns and events, per device in order, bounded over all
// devices by spool_max bytes. While the upstream link is up an item stays
// from when it arrives until the master's Ack covers it; while the link is
// down everything waits here, and after a reconnect each device's items are
// sent again, in order, before anything new. Acks reach the device only
// from the master, end to end, so the device keeps its own copy in its
// spool all along: an item dropped here for room (oldest first, counted)
// is not lost; the device is disconnected so that it sends it again.
type store struct {
	max int64

	mu      sync.Mutex
	bytes   int64
	items   int
	fifo    []*item // every device's items, oldest first; gone ones are skipped
	dropped uint64  // items dropped for room, ever
}

type item struct {
	d    *device
	seq  uint64
	wire []byte
	gone bool
}

// put keeps a device's item; it returns the devices that lost items to
// make room (they must send them again: disconnect them).
func (s *store) put(d *device, seq uint64, wire []byte) (lost []*device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it := &item{d: d, seq: seq, wire: wire}
	d.pending = append(d.pending, it)
	s.fifo = append(s.fifo, it)
	s.bytes += int64(len(wire))
	s.items++
	for s.bytes > s.max && len(s.fifo) > 0 {
		old := s.fifo[0]
		s.fifo[0] = nil
		s.fifo = s.fifo[1:]
		if old.gone {
			continue
		}
		s.removeLocked(old)
		s.dropped++
		if !old.d.lost {
			old.d.lost = true
			lost = append(lost, old.d)
		}
	}
	s.trimLocked()
	return lost
}

func (s *store) removeLocked(it *item) {
	it.gone = true
	s.bytes -= int64(len(it.wire))
	s.items--
	it.wire = nil
}

// trimLocked drops gone items from the front of the fifo.
func (s *store) trimLocked() {
	i := 0
	for i < len(s.fifo) && s.fifo[i].gone {
		s.fifo[i] = nil
		i++
	}
	s.fifo = s.fifo[i:]
	if len(s.fifo) == 0 {
		s.fifo = nil
	}
}

// ack forgets d's items up to seq.
func (s *store) ack(d *device, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for ; i < len(d.pending) && d.pending[i].seq <= seq; i++ {
		if !d.pending[i].gone {
			s.removeLocked(d.pending[i])
		}
		d.pending[i] = nil
	}
	d.pending = d.pending[i:]
	s.trimLocked()
}

// pending returns d's items, oldest first, and whether d lost any.
func (s *store) pending(d *device) (wires [][]byte, lost bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range d.pending {
		if !it.gone {
			wires = append(wires, it.wire)
		}
	}
	return wires, d.lost
}

// forget drops d's items (d is gone; it still has them in its spool).
func (s *store) forget(d *device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range d.pending {
		if !it.gone {
			s.removeLocked(it)
		}
	}
	d.pending = nil
	s.trimLocked()
}

// stats returns the bytes and items held and the items ever dropped.
func (s *store) stats() (bytes int64, items int, dropped uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.items, s.dropped
}
