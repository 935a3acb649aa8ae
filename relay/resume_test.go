package relay

import (
	"fmt"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/internal/udphop"
)

// TestRelayResume: a relay restarted while its WAN link is cut delivers,
// once the link is back, what a device sent it before both went down and
// only the relay came back: it resumes the device's session with the
// Hello it kept.
func TestRelayResume(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for QUIC's idle timeout")
	}
	old := orphanGrace
	t.Cleanup(func() { orphanGrace = old })
	orphanGrace = time.Second // the device is gone: no need to wait for it
	tm := startMaster(t, true)
	w := udphop.Start(t, tm.Addr().String())
	cfg := agentConfig(t, "r1", w.Addr())
	cfg.Relay = config.DefaultRelay()
	cfg.Relay.Heartbeat = 0
	tr := &testRelay{cfg: cfg}
	tr.boot(t, "127.0.0.1:0", nil)
	cam, camRun := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil) // the relay has its session

	w.Cut(true)
	// QUIC's idle timeout (15 s) ends the link; the device stays.
	testwait.For(t, waitTimeout+20*time.Second, "the relay to lose its link", func() bool { return !tr.Stats().Upstream })
	const n = 5
	for i := range n {
		if err := cam.SendEvent("site/door", map[string]any{"n": i}); err != nil {
			t.Fatalf("SendEvent: %v", err)
		}
	}
	waitFor(t, "the relay to hold the events", func() bool { return tr.Stats().SpoolItems >= n })
	// The site loses power: the relay stops, and the device never comes
	// back (a device that leaves while the relay runs sends its items
	// again itself, so they are not resumed).
	addr := tr.Addr().String()
	if err := tr.run.stop(); err != nil {
		t.Fatalf("relay stop: %v", err)
	}
	if err := camRun.stop(); err != nil {
		t.Fatalf("device stop: %v", err)
	}
	tr.boot(t, addr, nil)
	if st := tr.Stats(); st.SpoolItems < n {
		t.Fatalf("restarted relay holds %d items, want at least %d", st.SpoolItems, n)
	}

	w.Cut(false)
	for i := range n {
		tm.waitEvent(t, "site/door", func(d map[string]any) bool {
			data, _ := d["data"].(map[string]any)
			return d["id"] == "cam1" && fmt.Sprint(data["n"]) == fmt.Sprint(i)
		})
	}
	waitFor(t, "the relay to have sent it all", func() bool { return tr.Stats().SpoolItems == 0 })
}
