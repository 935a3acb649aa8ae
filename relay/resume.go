package relay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/reclog"
	"github.com/halite-fleet/halite/protocol"
)

// A relay restarted while the master is unreachable still has on disk
// what its devices sent and the master never acknowledged. Those devices
// hold it too and send it again when they reconnect, but a device that
// died meanwhile never will. So each device's Hello, as forwarded, is
// kept in the spool's hello.log (hellolog.go); a restarted relay resumes each
// such device's session upstream with it (the master agrees the same MAC
// key for the same Hello: protocol.Identity.SessionKX), sends its items in
// order, waits for the master's acks and closes the session. Items of a
// device whose Hello is missing, or whose session the master refuses,
// are counted as dropped. A device that left while the relay ran is
// recorded (recForget) and its items before the record are not resumed:
// it sends them again itself, and the Hello kept is its latest session's,
// whose MAC key is not the one those items were tagged with.

// resumeWait bounds how long a resumed session waits for the master's
// acks.
const resumeWait = 30 * time.Second

// load takes up the segments a previous run left: the items never
// acknowledged of devices whose Hello is kept become orphans (devices
// with no connection, for resumeOrphans); the others are counted as
// dropped. Segments left with nothing to send are deleted, and so are the
// Hellos of devices with nothing to resume. s is not shared yet.
func (s *store) load() error {
	names, err := filepath.Glob(filepath.Join(s.dir, "*"+segSuffix))
	if err != nil {
		return err
	}
	slices.Sort(names) // ids are fixed-width hex: oldest first
	held := make(map[string][]*item)
	var last uint64
	for _, name := range names {
		if id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), segSuffix), 16, 64); err == nil {
			last = max(last, id)
		}
		seg, damage, err := loadSegment(name, held)
		s.corrupt += uint64(reclog.Bytes(damage))
		reclog.Warn(s.log, name, damage)
		if err != nil {
			for _, seg := range s.segs {
				seg.f.Close()
			}
			s.segs = nil
			return err
		}
		s.segs = append(s.segs, seg)
	}
	s.nextSeg = last + 1
	hellos, damage, err := s.loadHellos(held)
	if err != nil {
		for _, seg := range s.segs {
			seg.f.Close()
		}
		s.segs = nil
		return err
	}
	reclog.Warn(s.log, filepath.Join(s.dir, helloLogName), damage)
	found, lost := 0, 0
	for id, items := range held {
		if len(items) == 0 {
			continue
		}
		found += len(items)
		h := hellos[id]
		if h == nil {
			lost += len(items)
			continue
		}
		d := &device{id: id, hello: h, pending: items, log: s.log}
		for _, it := range items {
			it.d = d
			it.seg.live++
			s.bytes += int64(it.wire)
			s.items++
		}
		s.orphans = append(s.orphans, d)
	}
	s.dropped += uint64(lost)
	for _, seg := range s.segs {
		for _, it := range seg.items {
			it.gone = it.d == nil
		}
		s.disk += seg.size
	}
	for _, seg := range slices.Clone(s.segs) {
		if seg.live == 0 {
			s.removeLocked(seg)
		}
	}
	for s.disk > s.max && len(s.segs) > 1 {
		s.dropSegmentLocked(s.segs[0], nil)
	}
	if found > 0 {
		s.log.Info("relay spool: returns and events of the previous run were never acknowledged; the sessions of their devices resume once the master is reachable",
			zap.String("dir", s.dir), zap.Int("items", found), zap.Int("devices", len(s.orphans)),
			zap.Int("dropped_no_hello", lost))
	}
	return nil
}

// loadSegment reads a previous run's segment, adding its items to held and
// applying its acks and forget records to held. Damage (a torn write, a
// flipped bit) is dropped and returned, the records after it kept
// (reclog.Scan): a damaged item is lost (its device still has it, unless
// it died), a damaged ack undone (its items are sent again, unless a later
// ack covers them), a damaged forget record undone (the device's items
// are resumed with its latest Hello, which the master refuses: they are
// dropped and counted).
func loadSegment(name string, held map[string][]*item) (*segment, []reclog.Damage, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	seg := &segment{path: name, f: f, sealed: true}
	_, damage := reclog.Scan(b, maxWireRecord, func(off, n int, rec reclog.Record, _ int) bool {
		switch rec.Kind {
		case recWire:
			id, wire, ok := splitWire(rec.Body)
			if !ok {
				return false
			}
			it := &item{seg: seg, off: int64(off), size: int32(n), wire: int32(len(wire)), seq: rec.Seq}
			seg.items = append(seg.items, it)
			held[id] = append(held[id], it)
		case recAck:
			items := held[string(rec.Body)]
			i := 0
			for i < len(items) && items[i].seq <= rec.Seq {
				i++
			}
			held[string(rec.Body)] = items[i:]
		case recForget:
			delete(held, string(rec.Body))
		default:
			return false
		}
		return true
	})
	seg.size, seg.written = int64(len(b)), int64(len(b))
	return seg, damage, nil
}

// orphanList returns the devices of the previous run whose items wait.
func (s *store) orphanList() []*device {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.orphans)
}

// abandon drops an orphan's items that wait, counting them.
func (s *store) abandon(d *device) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range d.pending {
		if !it.gone {
			s.goneLocked(it)
			s.dropped++
		}
	}
	for _, it := range d.pending {
		s.settleLocked(it.seg)
	}
	d.pending = nil
	s.orphans = slices.DeleteFunc(s.orphans, func(o *device) bool { return o == d })
}

// lastSeq returns the seq of d's newest item that waits, 0 if none.
func (s *store) lastSeq(d *device) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(d.pending) - 1; i >= 0; i-- {
		if !d.pending[i].gone {
			return d.pending[i].seq
		}
	}
	return 0
}

// orphanGrace is how long after the upstream link comes up the relay
// waits for a previous run's devices to come back before it resumes the
// sessions of those that did not: an agent whose session ended comes back
// within its random_reauth_delay (Salt's default, 10 s), so the relay
// waits its own random_reauth_delay, at least 10 s, and 5 s more. Tests
// set it.
var orphanGrace time.Duration

func (r *Relay) orphanGrace() time.Duration {
	if orphanGrace > 0 {
		return orphanGrace
	}
	// Devices may be configured apart from their relay: at least Salt's
	// default.
	return time.Duration(max(r.o.Config.RandomReauthDelay, 10)+5) * time.Second
}

// resumeOrphans resumes, on link l, the sessions of the previous run's
// devices that left items on disk, reattachWorkers at a time. An orphan
// whose device is connected again is abandoned: the device sends its
// items itself. Orphans not resumed because the link failed wait for the
// next link.
//
// It waits orphanGrace first: devices that are alive come back soon
// after a relay restart and send their items themselves, and a
// session resumed for one of them meanwhile would show it to the master as
// connected before it is (a job sent to it then would wait for a return
// that cannot come).
func (r *Relay) resumeOrphans(ctx context.Context, l *link) {
	if len(r.store.orphanList()) == 0 {
		return
	}
	t := time.NewTimer(r.orphanGrace())
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return
	case <-l.conn.Context().Done():
		return
	}
	back := func(d *device) bool {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return r.devices[d.id] != nil
	}
	r.onLink(ctx, l, func(d *device) bool {
		if r.proxyOf(d.id) != nil {
			return false // resumed before its own session (resumeProxyOrphan)
		}
		if back(d) {
			r.store.abandon(d)
			return false
		}
		return true
	}, r.store.orphanList(), r.resumeOrphan)
}

// resumeOrphan opens an orphan's session with its kept Hello, sends its
// items, waits for the master to acknowledge the last, and closes the
// session.
func (r *Relay) resumeOrphan(ctx context.Context, l *link, d *device) {
	s, f, msg, err := r.openUp(ctx, l, d)
	if err != nil {
		d.logger().Debug("resume the session of a device of the previous run", zap.Error(err))
		return
	}
	defer func() {
		s.CancelRead(quic.StreamErrorCode(protocol.KindOther))
		s.Close()
	}()
	if st, ok := msg.(*protocol.KeyStatus); !ok || st.Status != protocol.KeyAccepted {
		d.logger().Info("the master refused to resume the session of a device of the previous run; its items are dropped")
		r.store.abandon(d)
		return
	}
	wires, lost := r.store.pending(d)
	last := r.store.lastSeq(d)
	if lost || last == 0 {
		r.store.abandon(d)
		return
	}
	s.SetWriteDeadline(time.Now().Add(resumeWait))
	for _, w := range wires {
		if _, err := s.Write(w); err != nil {
			r.store.abandon(d)
			return
		}
	}
	s.SetReadDeadline(time.Now().Add(resumeWait))
	for {
		b, err := f.ReadFrame()
		if err != nil {
			break
		}
		msg, err := protocol.Decode(b)
		if err != nil {
			continue
		}
		switch msg := msg.(type) {
		case *protocol.Ack:
			r.store.ack(d, msg.Seq)
			if msg.Seq >= last {
				r.store.abandon(d) // nothing left: removes the orphan
				d.logger().Info("delivered what a device of the previous run had sent", zap.Int("items", len(wires)))
				return
			}
		case *protocol.Ping:
			if pb, err := protocol.Encode(&protocol.Pong{Seq: msg.Seq}); err == nil {
				s.Write(protocol.AppendFrame(nil, pb))
			}
		case *protocol.Error:
			r.store.abandon(d)
			return
		}
	}
	if ctx.Err() != nil || l.conn.Context().Err() != nil {
		return // the next link (or run) tries again
	}
	r.store.abandon(d)
}
