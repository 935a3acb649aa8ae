package relay

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

func idIs(id string) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["id"] == id }
}

// TestRelayJobs: devices behind a relay are enrolled, targeted (by glob,
// grain, list), return through it, and announced.
func TestRelayJobs(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	startDevice(t, tr, "cam1", map[string]any{"role": "camera"})
	startDevice(t, tr, "cam2", map[string]any{"role": "sensor"})
	for _, id := range []string{"r1", "cam1", "cam2"} {
		tm.waitEvent(t, "salt/minion/"+id+"/start", nil)
	}
	auth := tm.waitEvent(t, "salt/auth", idIs("cam1"))
	if auth["relay"] != "r1" {
		t.Errorf("salt/auth of cam1: relay = %v, want r1", auth["relay"])
	}
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil)

	got, rets, missing := tm.publish(t, "*", "test.ping", 20)
	if want := []string{"cam1", "cam2", "r1"}; !cmp.Equal(got, want) || len(missing) != 0 {
		t.Fatalf("test.ping '*': returned %v (missing %v), want %v", got, missing, want)
	}
	if rets["cam1"] != true {
		t.Errorf("cam1 returned %v, want true", rets["cam1"])
	}
	got, _, _ = tm.publish(t, "G@role:camera", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Errorf("grain target: returned %v, want %v", got, want)
	}
	got, rets, _ = tm.publish(t, "cam2", "test.echo", 20, "hello")
	if want := []string{"cam2"}; !cmp.Equal(got, want) || rets["cam2"] != "hello" {
		t.Errorf("test.echo cam2: returned %v %v, want [cam2] hello", got, rets)
	}
	hb := tm.waitEvent(t, "halite/relay/r1/heartbeat", func(d map[string]any) bool {
		data, _ := d["data"].(map[string]any)
		return fmt.Sprint(data["devices"]) == "2"
	})
	if data := hb["data"].(map[string]any); data["upstream"] != true {
		t.Errorf("heartbeat %v: want upstream true", data)
	}
}

// TestRelayJobBeforeTakeIn: a job the master publishes to a device the
// moment it accepted it comes on the link's control stream while the
// relay may still be handling the device's accepted status (another
// stream): the relay gives it the jobs fanned out meanwhile. Before
// recent.go the job went to nobody and the ping timed out (TestRelayEnrolment
// failed that way now and then on a loaded machine).
func TestRelayJobBeforeTakeIn(t *testing.T) {
	tm := startMaster(t, true)
	reached, release := make(chan struct{}), make(chan struct{})
	tr := startRelay(t, tm, "r1", nil, nil, func(tr *testRelay) {
		tr.beforeTakeIn = func(id string) {
			if id == "cam1" {
				close(reached)
				<-release
			}
		}
	})
	tm.waitEvent(t, "salt/minion/r1/start", nil)
	startDevice(t, tr, "cam1", map[string]any{"role": "camera"})
	select {
	case <-reached:
	case <-time.After(waitTimeout):
		t.Fatal("the relay never read cam1's accepted status")
	}
	// The master attached cam1 before it wrote the status: it publishes
	// to it now, by target and by name, while the relay holds cam1.
	type answer struct{ got []string }
	pub := func(tgt string) chan answer {
		c := make(chan answer, 1)
		go func() {
			got, _, _ := tm.publish(t, tgt, "test.ping", 10)
			c <- answer{got}
		}()
		return c
	}
	byGlob, byGrain := pub("cam1"), pub("G@role:camera")
	time.Sleep(700 * time.Millisecond) // the jobs reach the relay and are fanned out
	close(release)
	for name, c := range map[string]chan answer{"glob": byGlob, "grain": byGrain} {
		if a := <-c; !cmp.Equal(a.got, []string{"cam1"}) {
			t.Errorf("test.ping by %s published while the relay took cam1 in: returned %v, want [cam1]", name, a.got)
		}
	}
}

// TestRelayEnrolment: a device's key goes pending through the relay,
// halite-key accepts it, and deletion reaches the device.
func TestRelayEnrolment(t *testing.T) {
	tm := startMaster(t, false)
	tr := startRelay(t, tm, "r1", nil, nil)
	tm.waitEvent(t, "salt/auth", idIs("r1"))
	tm.wheel(t, "key.accept", "r1")
	tm.waitEvent(t, "salt/minion/r1/start", nil)
	startDevice(t, tr, "cam1", nil)
	auth := tm.waitEvent(t, "salt/auth", func(d map[string]any) bool { return d["id"] == "cam1" && d["act"] == "pend" })
	if auth["relay"] != "r1" {
		t.Errorf("pending cam1: relay = %v, want r1", auth["relay"])
	}
	tm.wheel(t, "key.accept", "cam1")
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	got, _, _ := tm.publish(t, "cam1", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Fatalf("test.ping cam1: returned %v, want %v", got, want)
	}
	tm.wheel(t, "key.delete", "cam1")
	tm.waitEvent(t, "halite/relay/r1/device/cam1/disconnected", nil)
	// The device comes back, and is pending again.
	tm.waitEvent(t, "salt/auth", func(d map[string]any) bool {
		return d["id"] == "cam1" && d["act"] == "pend" && d["relay"] == "r1"
	})
}

// TestRelayMasterRestart: while the master is away the relay keeps its
// devices; what they send meanwhile (a job's return, events) reaches the
// restarted master, nothing lost.
func TestRelayMasterRestart(t *testing.T) {
	tm := startMaster(t, true)
	forwarded := make(chan struct{}, 16)
	tr := startRelay(t, tm, "r1", nil, func(typ protocol.Type, wire []byte) []byte {
		if typ == protocol.TypeJob {
			forwarded <- struct{}{}
		}
		return wire // observed, not altered
	})
	cam, _ := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	jid := asyncJob(t, tm, "cam1", "test.sleep", 2)
	// The master goes once the relay has the job (before, the job might
	// go down with it).
	select {
	case <-forwarded:
	case <-time.After(waitTimeout):
		t.Fatal("the relay never forwarded the job")
	}
	tm.restart(t)
	const n = 10
	for i := range n {
		if err := cam.SendEvent("site/door", map[string]any{"n": i}); err != nil {
			t.Fatalf("SendEvent: %v", err)
		}
	}
	tm.waitEvent(t, "salt/job/"+jid+"/ret/cam1", nil)
	for i := range n {
		tm.waitEvent(t, "site/door", func(d map[string]any) bool {
			data, _ := d["data"].(map[string]any)
			return d["id"] == "cam1" && fmt.Sprint(data["n"]) == fmt.Sprint(i)
		})
	}
	if st := tr.Stats(); st.SpoolDropped != 0 {
		t.Errorf("relay dropped %d items", st.SpoolDropped)
	}
}

// TestRelayRestart: devices come back after their relay restarts.
func TestRelayRestart(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil)
	tr.restart(t)
	waitFor(t, "cam1 back behind the restarted relay", func() bool { return tr.Stats().Devices == 1 })
	got, _, _ := tm.publish(t, "cam1", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Fatalf("test.ping cam1 after the relay restart: returned %v, want %v", got, want)
	}
}

// TestRelayTamper: a relay that alters jobs or returns gets nothing run
// and nothing stored.
func TestRelayTamper(t *testing.T) {
	for _, typ := range []protocol.Type{protocol.TypeJob, protocol.TypeReturn} {
		t.Run(typ.String(), func(t *testing.T) {
			tm := startMaster(t, true)
			tampered := 0
			tr := startRelay(t, tm, "r1", nil, func(got protocol.Type, wire []byte) []byte {
				if got != typ {
					return wire
				}
				tampered++
				return flipBody(t, wire)
			})
			startDevice(t, tr, "cam1", nil)
			tm.waitEvent(t, "salt/minion/cam1/start", nil)
			got, _, missing := tm.publish(t, "cam1", "test.ping", 3)
			if len(got) != 0 || !cmp.Equal(missing, []string{"cam1"}) {
				t.Fatalf("through a relay altering %ss: returned %v, missing %v; want none, [cam1]", typ, got, missing)
			}
		})
	}
}

// flipBody changes one byte of a signed message's body.
func flipBody(t *testing.T, wire []byte) []byte {
	out, err := flipSigned(wire)
	if err != nil {
		t.Errorf("tamper: %v", err)
		return wire
	}
	return out
}

// TestRelayRateLimit: a device over its event rate is held back to it,
// and everything it sent arrives.
func TestRelayRateLimit(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.EventRate, c.EventBurst = 5, 4 }, nil)
	cam, _ := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	const n = 12
	start := time.Now()
	for i := range n {
		if err := cam.SendEvent("site/motion", map[string]any{"n": i}); err != nil {
			t.Fatalf("SendEvent: %v", err)
		}
	}
	for i := range n {
		tm.waitEvent(t, "site/motion", func(d map[string]any) bool {
			data, _ := d["data"].(map[string]any)
			return fmt.Sprint(data["n"]) == fmt.Sprint(i)
		})
	}
	// 4 at once, then 8 at 5 a second.
	if took, least := time.Since(start), 1500*time.Millisecond; took < least {
		t.Errorf("%d events through a relay limiting to 5/s, burst 4, took %v; want at least %v", n, took, least)
	}
	if st := tr.Stats(); st.Throttled == 0 {
		t.Errorf("relay stats %+v: want some throttled", st)
	}
}

// TestRelayDevicePins: a device behind a relay pins the relay's key and
// the master's apart, and refuses a master that is not the one it expects.
func TestRelayDevicePins(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	relayFP := protocol.Fingerprint(tr.agent.Identity().Pub)

	good := agentConfig(t, "cam1", tr.Addr().String())
	good.MasterFinger = tm.Fingerprint()
	startDeviceCfg(t, good)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	// The device pins once it reads the master's answer, just after the
	// master announced it.
	var b []byte
	waitFor(t, "cam1 to pin its keys", func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(good.PkiDir, "minion_relay.pub"))
		_, merr := os.Stat(filepath.Join(good.PkiDir, "minion_master.pub"))
		return err == nil && merr == nil
	})
	if pub, err := protocol.ParsePublicKey(b); err != nil || protocol.Fingerprint(pub) != relayFP {
		t.Errorf("pinned relay key %s (%v), want %s", b, err, relayFP)
	}
	b, err := os.ReadFile(filepath.Join(good.PkiDir, "minion_master.pub"))
	if pub, perr := protocol.ParsePublicKey(b); err != nil || perr != nil || protocol.Fingerprint(pub) != tm.Fingerprint() {
		t.Errorf("pinned master key %s (%v), want the master's %s", b, err, tm.Fingerprint())
	}

	// A device told to expect another master (here: the relay's key)
	// reaches the master (which accepts its key: auto_accept) but refuses
	// the session, so it runs nothing.
	bad := agentConfig(t, "cam2", tr.Addr().String())
	bad.MasterFinger = relayFP
	_, run := startDeviceCfg(t, bad)
	tm.waitEvent(t, "salt/auth", idIs("cam2"))
	got, _, _ := tm.publish(t, "cam*", "test.ping", 5)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Errorf("test.ping cam*: returned %v, want %v (cam2 must refuse the master)", got, want)
	}
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	if tr.Stats().Devices != 1 {
		t.Errorf("relay serves %d devices, want 1", tr.Stats().Devices)
	}
}

// TestRelaySpoolRestart: a relay that starts with returns and events of
// its previous run on disk, of a device whose Hello it did not keep,
// counts them as dropped and reports them once its link is up (the device
// sends them again from its own spool).
func TestRelaySpoolRestart(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	tm.waitEvent(t, "salt/minion/r1/start", nil)
	addr := tr.Addr().String()
	if err := tr.run.stop(); err != nil {
		t.Fatalf("relay stop: %v", err)
	}
	// What the relay held when it stopped (a link down): 5 items of cam1.
	const n = 5
	s := newStore(tr.cfg.RelaySpoolDir(), 1<<20, zap.NewNop())
	if err := s.open(); err != nil {
		t.Fatal(err)
	}
	cam := &device{id: "cam1"}
	for seq := uint64(1); seq <= n; seq++ {
		s.put(cam, seq, wireOf(cam, seq, 100))
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	tr.boot(t, addr, nil)
	if st := tr.Stats(); st.SpoolDropped != n || st.SpoolItems != 0 {
		t.Errorf("restarted relay: %d items held, %d dropped; want 0, %d", st.SpoolItems, st.SpoolDropped, n)
	}
	ev := tm.waitEvent(t, "halite/relay/r1/spool/dropped", nil)
	if data, _ := ev["data"].(map[string]any); fmt.Sprint(data["dropped"]) != fmt.Sprint(n) {
		t.Errorf("spool/dropped event %v: want dropped %d", ev, n)
	}
}
