package relay

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/testwait"
)

// wan is a UDP forwarder standing for a relay's WAN link to the master:
// cut, it drops every datagram both ways, as a cable cut does (no close
// reaches either end).
type wan struct {
	pc     *net.UDPConn
	master *net.UDPAddr
	cut    atomic.Bool

	mu    sync.Mutex
	peers map[string]*net.UDPConn // by client address: its socket towards the master
	wg    sync.WaitGroup
}

func startWAN(t *testing.T, master net.Addr) *wan {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	w := &wan{pc: pc, master: master.(*net.UDPAddr), peers: make(map[string]*net.UDPConn)}
	w.wg.Add(1)
	go w.serve()
	t.Cleanup(w.close)
	return w
}

func (w *wan) addr() string { return w.pc.LocalAddr().String() }

func (w *wan) serve() {
	defer w.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := w.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if w.cut.Load() {
			continue
		}
		w.mu.Lock()
		up := w.peers[from.String()]
		if up == nil {
			up, err = net.DialUDP("udp", nil, w.master)
			if err != nil {
				w.mu.Unlock()
				continue
			}
			w.peers[from.String()] = up
			w.wg.Add(1)
			go w.back(up, from)
		}
		w.mu.Unlock()
		up.Write(buf[:n])
	}
}

// back forwards the master's datagrams to the client at to.
func (w *wan) back(up *net.UDPConn, to *net.UDPAddr) {
	defer w.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		if !w.cut.Load() {
			w.pc.WriteToUDP(buf[:n], to)
		}
	}
}

func (w *wan) close() {
	w.pc.Close()
	w.mu.Lock()
	for _, up := range w.peers {
		up.Close()
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// TestRelayResume: a relay restarted while its WAN link is cut delivers,
// once the link is back, what a device sent it before both went down and
// only the relay came back: it resumes the device's session with the
// Hello it kept.
func TestRelayResume(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for QUIC's idle timeout")
	}
	tm := startMaster(t, true)
	w := startWAN(t, tm.Addr())
	cfg := agentConfig(t, "r1", w.addr())
	cfg.Relay = config.DefaultRelay()
	cfg.Relay.Heartbeat = 0
	tr := &testRelay{cfg: cfg}
	tr.boot(t, "127.0.0.1:0", nil)
	cam, camRun := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil) // the relay has its session

	w.cut.Store(true)
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

	w.cut.Store(false)
	for i := range n {
		tm.waitEvent(t, "site/door", func(d map[string]any) bool {
			data, _ := d["data"].(map[string]any)
			return d["id"] == "cam1" && fmt.Sprint(data["n"]) == fmt.Sprint(i)
		})
	}
	waitFor(t, "the relay to have sent it all", func() bool { return tr.Stats().SpoolItems == 0 })
}
