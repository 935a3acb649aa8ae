package relay

import (
	"context"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// helloWith dials the relay at addr with qc as a new device id, says
// Hello and returns the connection once the master accepted the key.
func helloWith(t *testing.T, addr, id string, qc *quic.Config) *quic.Conn {
	t.Helper()
	conn, accepted, err := dialHello(context.Background(), addr, id, qc)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	if !accepted {
		t.Fatalf("%s: hello not answered accepted", id)
	}
	return conn
}

// TestRelayDeviceTimeout: relay: device_timeout is the device listener's
// QUIC idle timeout, and the devices, not the relay, keep idle sessions
// alive (protocol.AgentQUICConfig). A real agent, and a client with the
// previous release's QUIC settings (5 s keep-alives), stay connected
// through silences over twice the timeout; a client that sends no
// keep-alives is dropped after it — which it would not be if the relay
// sent PINGs of its own, since their ACKs would keep the session alive.
func TestRelayDeviceTimeout(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.DeviceTimeout = 5 }, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil)
	device := func(id string) *device {
		tr.mu.RLock()
		defer tr.mu.RUnlock()
		return tr.devices[id]
	}
	cam1 := device("cam1")

	old := helloWith(t, tr.Addr().String(), "old1", protocol.QUICConfig())
	silentQC := protocol.AgentQUICConfig()
	silentQC.KeepAlivePeriod = 0
	silent := helloWith(t, tr.Addr().String(), "silent1", silentQC)
	since := time.Now()
	select {
	case <-silent.Context().Done():
		if d := time.Since(since); d < 4*time.Second {
			t.Errorf("the silent device was dropped after %v, before its 5 s device_timeout", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a device that sent nothing for 30 s is still connected (device_timeout 5)")
	}
	time.Sleep(time.Until(since.Add(12 * time.Second))) // 12 s of silence in all
	if old.Context().Err() != nil {
		t.Errorf("a client with 5 s keep-alives was dropped: %v", context.Cause(old.Context()))
	}
	if d := device("cam1"); d != cam1 {
		t.Errorf("cam1's session was replaced during the silence (reconnected: the agent sent no keep-alives)")
	}
	if got, _, missing := tm.publish(t, "cam1", "test.ping", 5); len(got) != 1 || got[0] != "cam1" {
		t.Errorf("test.ping cam1 after the silence: returned %v, missing %v", got, missing)
	}
}
