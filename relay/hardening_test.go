package relay

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// knock is a stranger's try at the relay at addr as id, with a new key:
// it says Hello and keeps the connection as long as the relay does (or
// until ctx ends). It reports whether the master accepted the key.
func knock(ctx context.Context, addr, id string) bool {
	conn, accepted, err := dialHello(ctx, addr, id, protocol.QUICConfig())
	if err != nil {
		return false
	}
	defer conn.CloseWithError(0, "")
	select {
	case <-conn.Context().Done():
	case <-ctx.Done():
	}
	return accepted
}

// dialHello dials the relay at addr with qc as id, with a new key, and
// says Hello: it returns the connection and whether the master accepted
// the key.
func dialHello(ctx context.Context, addr, id string, qc *quic.Config) (*quic.Conn, bool, error) {
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		return nil, false, err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(dctx, addr, ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), qc)
	if err != nil {
		return nil, false, err
	}
	s, err := conn.OpenStreamSync(dctx)
	if err != nil {
		conn.CloseWithError(0, "")
		return nil, false, err
	}
	f := protocol.NewFramer(s, 0)
	kx, _ := protocol.NewKX()
	if err := f.Write(&protocol.Hello{ID: id, Caps: protocol.CapabilityVersion, KX: kx.Public(),
		KXSig: protocol.SignAgentKX(ident, id, kx.Public())}); err != nil {
		conn.CloseWithError(0, "")
		return nil, false, err
	}
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	msg, err := f.Read()
	return conn, err == nil && isAccepted(msg), nil
}

func isAccepted(msg protocol.Message) bool {
	st, ok := msg.(*protocol.KeyStatus)
	return ok && st.Status == protocol.KeyAccepted
}

// TestRelayStrangerHoldsNoID: a stranger presents an accepted device's id
// with a new key each time, from three connections at once, each held as
// long as the relay holds it, while the device is away and after. The
// device still gets back in and answers every job; the stranger is never
// accepted, and its tries go on throughout.
func TestRelayStrangerHoldsNoID(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	cfg := agentConfig(t, "cam1", tr.Addr().String())
	_, run := startDeviceCfg(t, cfg)
	tm.waitEvent(t, "halite/relay/r1/device/cam1/connected", nil)
	if err := run.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cam1 gone from the relay", func() bool { return tr.Stats().Devices == 0 })

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var tries, accepted atomic.Int64
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if knock(ctx, tr.Addr().String(), "cam1") {
					accepted.Add(1)
				}
				tries.Add(1)
			}
		}()
	}
	defer wg.Wait()
	defer stop()
	waitFor(t, "the stranger knocking", func() bool { return tries.Load() >= 3 })

	// The device comes back while the stranger knocks.
	startDeviceCfg(t, cfg)
	waitFor(t, "cam1 back behind the relay", func() bool { return tr.Stats().Devices == 1 })
	before := tries.Load()
	for i := range 3 {
		got, _, missing := tm.publish(t, "cam1", "test.ping", 20)
		if want := []string{"cam1"}; !cmp.Equal(got, want) {
			t.Fatalf("test.ping %d with the stranger knocking: returned %v (missing %v), want %v", i, got, missing, want)
		}
	}
	waitFor(t, "the stranger knocking on", func() bool { return tries.Load() > before })
	stop()
	wg.Wait()
	if n := accepted.Load(); n != 0 {
		t.Errorf("the stranger's key was accepted %d times of %d, want never", n, tries.Load())
	}
	t.Logf("the stranger tried %d times", tries.Load())
}

// TestRelayAllow: the master serves a relay link only to an agent its
// relay_allow lists (by id or glob). Another accepted agent asking for a
// link is refused with an error of kind forbidden, which the relay's link
// returns; a listed one relays its devices.
func TestRelayAllow(t *testing.T) {
	tm := startMasterWith(t, true, func(c *config.Master) { c.RelayAllow = []string{"gw-*", "edge1"} })

	// A relay not listed: its own agent is accepted, its link refused.
	cfg := agentConfig(t, "r1", tm.Addr().String())
	cfg.Relay = config.DefaultRelay()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	a, err := agent.New(cfg, log.Named("agent"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Config: cfg, Identity: a.Identity(), Version: agent.Version, Log: log.Named("relay")})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err = r.runLink(ctx, tm.Addr().String())
	if k := protocol.KindOf(err); k != protocol.KindForbidden || !strings.Contains(err.Error(), "relay_allow") {
		t.Errorf("link of r1, not in relay_allow: got %v (kind %q), want kind %q naming relay_allow", err, k, protocol.KindForbidden)
	}
	tm.waitEvent(t, "salt/auth", func(d map[string]any) bool { return d["id"] == "r1" && d["result"] == true })

	// Listed by a glob: it relays.
	tr := startRelay(t, tm, "gw-7", nil, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "halite/relay/gw-7/device/cam1/connected", nil)
	got, _, _ := tm.publish(t, "cam1", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Errorf("test.ping cam1 behind gw-7: returned %v, want %v", got, want)
	}
}

// heapPeak samples the heap in use until stop is called, and returns its
// peak over what it was when it began.
func heapPeak() (stop func() uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-done:
				peak <- top - min(top, base)
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		return <-peak
	}
}

// sendHello connects to addr with a new key, sends the frame wire (a
// Hello) and returns the error kind the peer ended the connection with
// (KindOther: it answered otherwise).
func sendHello(ctx context.Context, addr string, wire []byte) protocol.Kind {
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		return protocol.KindOther
	}
	conn, err := quic.DialAddr(ctx, addr, ident.ClientTLS(func(ed25519.PublicKey) error { return nil }), protocol.QUICConfig())
	if err != nil {
		return protocol.KindOther
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return protocol.KindOther
	}
	go s.Write(wire) // fails once the peer gives up on it
	f := protocol.NewFramer(s, 0)
	for {
		msg, err := f.Read()
		var ae *quic.ApplicationError
		switch {
		case errors.As(err, &ae):
			return protocol.Kind(ae.ErrorCode)
		case err != nil:
			return protocol.KindOther
		}
		if e, ok := msg.(*protocol.Error); ok {
			return e.Kind
		}
		if _, ok := msg.(*protocol.KeyStatus); ok {
			return protocol.KindOther
		}
	}
}

// TestHugeHellos: a dozen 3.9 MB Hellos at once, before any key check,
// cost the master and the relay next to nothing: each is refused (too
// large) from its frame's header, before its bytes are read or decoded.
// (They took the master from 177 to 735 MiB, decoded at some 16 times
// their size.)
func TestHugeHellos(t *testing.T) {
	tm := startMaster(t, false)
	tr := startRelay(t, tm, "r1", nil, nil)
	// 65 arrays of 60000 small integers: 3.9 MB of CBOR.
	grains := make(map[string]any)
	for i := range 65 {
		a := make([]any, 60000)
		for j := range a {
			a[j] = j % 24
		}
		grains[fmt.Sprintf("g%02d", i)] = a
	}
	body, err := protocol.Encode(&protocol.Hello{ID: "big", Caps: protocol.CapabilityVersion, Grains: grains,
		KX: make([]byte, 32), KXSig: make([]byte, 64)})
	if err != nil {
		t.Fatal(err)
	}
	wire := protocol.AppendFrame(nil, body)
	grains = nil
	t.Logf("hello of %d bytes", len(wire))
	for _, tc := range []struct {
		name string
		addr string
	}{
		{"master", tm.Addr().String()},
		{"relay", tr.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const conns = 12
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			peak := heapPeak()
			kinds := make([]protocol.Kind, conns)
			var wg sync.WaitGroup
			for i := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					kinds[i] = sendHello(ctx, tc.addr, wire)
				}()
			}
			wg.Wait()
			grew := peak()
			for i, k := range kinds {
				if k != protocol.KindTooLarge {
					t.Errorf("hello %d: ended with %q, want %q", i, k, protocol.KindTooLarge)
				}
			}
			t.Logf("heap in use grew by %d KiB at most", grew>>10)
			if grew > 64<<20 {
				t.Errorf("%d hellos of %d bytes: the heap grew by %d MiB, want at most 64", conns, len(wire), grew>>20)
			}
		})
	}
}

// matched publishes test.ping to tgt and returns the ids that returned,
// sorted; none if the master matched no minion.
func (tm *testMaster) matched(t *testing.T, tgt string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := api.Dial(ctx, tm.sock, &api.Request{Op: api.OpPublish, Tgt: tgt, TgtType: "compound", Fun: "test.ping", Timeout: 5, User: "tester"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	var ids []string
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish %s: %v", tgt, err)
		}
		if r.Kind == api.KindReturn {
			id, _ := r.Data["id"].(string)
			ids = append(ids, id)
		}
		if r.Kind == api.KindError || r.Done {
			sort.Strings(ids)
			return ids
		}
	}
}

// TestLargeGrains: agents whose grains (200 KiB) do not fit in a Hello
// send them once accepted; the master targets them by any grain, direct
// or behind a relay (which targets by them too), and again after the
// master restarts (the relay resumes the device's session with them).
func TestLargeGrains(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	big := func(who string) map[string]any {
		g := map[string]any{"who": who}
		for i := range 4400 {
			g[fmt.Sprintf("g%04d", i)] = strings.Repeat("x", 40)
		}
		g["zz_tail"] = "last-" + who
		return g
	}
	if b, _ := protocol.Encode(&protocol.Grains{Grains: big("cam1")}); len(b) < 200<<10 {
		t.Fatalf("grains of %d bytes, want at least 200 KiB", len(b))
	}
	startDevice(t, tr, "cam1", big("cam1"))
	web := agentConfig(t, "web1", tm.Addr().String())
	web.Grains = big("web1")
	startDeviceCfg(t, web)
	check := func(when string) {
		t.Helper()
		for _, id := range []string{"cam1", "web1"} {
			tm.waitEvent(t, "salt/minion/"+id+"/start", nil)
		}
		// The grains follow the Hello: wait for them to arrive.
		waitFor(t, when+": the master to hold the grains of cam1 and web1", func() bool {
			return cmp.Equal(tm.matched(t, "G@who:cam1 or G@who:web1"), []string{"cam1", "web1"})
		})
		for _, tc := range []struct {
			tgt  string
			want []string
		}{
			{"G@zz_tail:last-*", []string{"cam1", "web1"}},
			{"G@zz_tail:last-cam1", []string{"cam1"}},
			{"G@g4399:xxxx*", []string{"cam1", "web1"}},
		} {
			if got, _, missing := tm.publish(t, tc.tgt, "test.ping", 20); !cmp.Equal(got, tc.want) || len(missing) != 0 {
				t.Errorf("%s: test.ping %s: returned %v (missing %v), want %v", when, tc.tgt, got, missing, tc.want)
			}
		}
	}
	check("first")
	tm.restart(t)
	check("after the master's restart")
}
