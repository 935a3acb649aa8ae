package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// TestRelayAdmitsHandshakes: past relay: admit handshakes a second, a
// device's connection is refused at once (CONNECTION_REFUSED), and agents
// come back by themselves until every one is in.
func TestRelayAdmitsHandshakes(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.Admit = 2 }, nil)

	// Raw dials at once: the bucket holds one handshake (a quarter
	// second's worth, at least one), so most are refused, and quickly.
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		start := time.Now()
		conn, err := quic.DialAddr(ctx, tr.Addr().String(), ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
		cancel()
		var te *quic.TransportError
		switch {
		case err == nil:
			conn.CloseWithError(0, "")
		case errors.As(err, &te) && te.ErrorCode == quic.ConnectionRefused:
			refused++
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a refused handshake took %v; want it refused at once", took)
			}
		default:
			t.Fatalf("dial: %v; want success or CONNECTION_REFUSED", err)
		}
	}
	if refused < 3 {
		t.Errorf("%d of 6 handshakes at once refused with admit 2; want most", refused)
	}
	if st := tr.Stats(); st.Refused < uint64(refused) {
		t.Errorf("stats %+v: want Refused ≥ %d", st, refused)
	}

	// Real agents, all at once: refused ones try again, all get in.
	for i := range 4 {
		startDevice(t, tr, fmt.Sprintf("cam%d", i), nil)
	}
	for i := range 4 {
		tm.waitEvent(t, fmt.Sprintf("salt/minion/cam%d/start", i), nil)
	}
	got, _, missing := tm.publish(t, "cam*", "test.ping", 5)
	if len(got) != 4 {
		t.Errorf("test.ping cam*: returned %v, missing %v; want all four", got, missing)
	}
}

// TestRelayAcksRideWithJobs: the master's ack of a device's event waits at
// the relay and goes down in the same write as the device's next job; with
// no job, it goes alone after ackDelay.
func TestRelayAcksRideWithJobs(t *testing.T) {
	old := ackDelay
	t.Cleanup(func() { ackDelay = old })
	ackDelay = time.Hour // no ack goes alone in this part
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	a, _ := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	dev := func() *device {
		tr.mu.RLock()
		defer tr.mu.RUnlock()
		return tr.devices["cam1"]
	}
	// waiting reports whether an ack waits at the relay for cam1.
	waiting := func() bool {
		d := dev()
		d.ackMu.Lock()
		defer d.ackMu.Unlock()
		return d.toAck > d.acked
	}
	if err := a.SendEvent("site/door", map[string]any{"open": true}); err != nil {
		t.Fatal(err)
	}
	tm.waitEvent(t, "site/door", nil)
	waitFor(t, "the master's ack of the event at the relay", waiting)
	time.Sleep(300 * time.Millisecond)
	if !waiting() {
		t.Fatal("the ack went down alone before any job, with ackDelay an hour")
	}
	if got, _, _ := tm.publish(t, "cam1", "test.ping", 5); len(got) != 1 {
		t.Fatalf("test.ping cam1: returned %v", got)
	}
	if waiting() {
		t.Error("an ack still waits after a job went to the device")
	}

	// With no job, the ack goes alone once ackDelay has passed.
	addr := tr.Addr().String()
	if err := tr.run.stop(); err != nil {
		t.Fatal(err)
	}
	ackDelay = 400 * time.Millisecond // read by the next relay's ackLoop
	tr.boot(t, addr, nil)
	waitFor(t, "cam1 back behind the restarted relay", func() bool { d := dev(); return d != nil && d.accepted.Load() })
	if err := a.SendEvent("site/door", map[string]any{"open": false}); err != nil {
		t.Fatal(err)
	}
	tm.waitEvent(t, "site/door", func(ev map[string]any) bool {
		data, _ := ev["data"].(map[string]any)
		return fmt.Sprint(data["open"]) == "false"
	})
	waitFor(t, "the master's ack of the second event at the relay", func() bool {
		d := dev()
		d.ackMu.Lock()
		defer d.ackMu.Unlock()
		return d.toAck > 0
	})
	waitFor(t, "the ack to go down alone", func() bool { return !waiting() })
}

// TestRelayBoundsHandshakes: the device listener lets at most half a
// second's worth of admit handshakes be in progress at once (what the
// bound does is pinned by protocol's TestQUICMaxHandshakes); the Initials
// it drops are counted in Stats and in the heartbeat's handshakes_deferred.
func TestRelayBoundsHandshakes(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.Admit = 300; c.Heartbeat = 1 }, nil)
	qc := tr.deviceQUICConfig()
	if qc.MaxHandshakes != 150 || qc.OnHandshakeDropped == nil {
		t.Fatalf("device listener: MaxHandshakes %d (drop counted: %v); want 150 with admit 300", qc.MaxHandshakes, qc.OnHandshakeDropped != nil)
	}
	for range 3 {
		qc.OnHandshakeDropped()
	}
	if st := tr.Stats(); st.Deferred != 3 {
		t.Errorf("stats %+v: want Deferred 3", st)
	}
	tm.waitEvent(t, "halite/relay/r1/heartbeat", func(d map[string]any) bool {
		data, _ := d["data"].(map[string]any)
		return fmt.Sprint(data["handshakes_deferred"]) == "3"
	})
	// The device hop's max_ack_delay (protocol.TestQUICMaxAckDelay checks
	// what a Config with it advertises), on the listener and on the
	// configuration each admitted device's handshake gets.
	plain, err := qc.GetConfigForClient(&quic.ClientInfo{})
	if err != nil {
		t.Fatalf("admit a device: %v", err)
	}
	if qc.MaxAckDelay != protocol.DeviceMaxAckDelay || plain.MaxAckDelay != protocol.DeviceMaxAckDelay {
		t.Errorf("device listener's MaxAckDelay %v, a device's %v; want %v", qc.MaxAckDelay, plain.MaxAckDelay, protocol.DeviceMaxAckDelay)
	}
	if got := maxHandshakes(8); got != minHandshakes {
		t.Errorf("maxHandshakes(8) = %d, want %d: a slow admit rate still lets a few overlap", got, minHandshakes)
	}
}
