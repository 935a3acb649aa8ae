package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/quic-go/quic-go"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// sendEvents fires n events tagged tag from a, numbered from first.
func sendEvents(t *testing.T, a *agent.Agent, tag string, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		if err := a.SendEvent(tag, map[string]any{"n": i}); err != nil {
			t.Fatalf("SendEvent: %v", err)
		}
	}
}

// waitInOrder waits for events tag from id numbered 0..n-1 and checks
// that the master published them in that order (each the first time it
// did: an item sent again after a reconnect may be published twice).
func (tm *testMaster) waitInOrder(t *testing.T, tag, id string, n int) {
	t.Helper()
	for i := range n {
		tm.waitEvent(t, tag, func(d map[string]any) bool {
			data, _ := d["data"].(map[string]any)
			return d["id"] == id && fmt.Sprint(data["n"]) == fmt.Sprint(i)
		})
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var got []int
	seen := map[int]bool{}
	for _, ev := range tm.seen {
		data, _ := ev.Data["data"].(map[string]any)
		if ev.Tag != tag || ev.Data["id"] != id {
			continue
		}
		var k int
		fmt.Sscan(fmt.Sprint(data["n"]), &k)
		if !seen[k] {
			seen[k] = true
			got = append(got, k)
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events %s of %s in the order the master published them (-want +got):\n%s", tag, id, d)
	}
}

// TestRelayBatches: through a relay whose master takes batches (with the
// smallest batch_max, so that a burst takes several), every device's
// return arrives, and each device's events in the order it sent them,
// with batch_delay 5 ms (the default) and 0 (send at once).
func TestRelayBatches(t *testing.T) {
	for _, delay := range []int{5, 0} {
		t.Run(fmt.Sprintf("batch_delay=%d", delay), func(t *testing.T) {
			tm := startMaster(t, true)
			tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.BatchMax, c.BatchDelay = config.MinRelayBatch, delay }, nil)
			const devices = 5
			var cams []*agent.Agent
			var want []string
			for i := range devices {
				id := fmt.Sprintf("cam%d", i)
				a, _ := startDevice(t, tr, id, nil)
				cams = append(cams, a)
				want = append(want, id)
			}
			for _, id := range want {
				tm.waitEvent(t, "salt/minion/"+id+"/start", nil)
			}
			waitFor(t, "the devices behind the relay", func() bool { return tr.Stats().Devices == devices })
			got, _, missing := tm.publish(t, "cam*", "test.ping", 20)
			if !cmp.Equal(got, want) || len(missing) != 0 {
				t.Fatalf("test.ping cam*: returned %v (missing %v), want %v", got, missing, want)
			}
			const n = 30
			for _, a := range cams[:2] {
				sendEvents(t, a, "site/order", 0, n)
			}
			tm.waitInOrder(t, "site/order", "cam0", n)
			tm.waitInOrder(t, "site/order", "cam1", n)
			if st := tr.Stats(); st.Batches == 0 {
				t.Errorf("relay stats %+v: want batches sent", st)
			}
		})
	}
}

// TestRelayOldMaster: a relay whose master is older than batches
// (capability 5) sends every device's returns and events on its stream.
func TestRelayOldMaster(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil, func(tr *testRelay) { tr.maxCaps = protocol.CapRelay })
	cam, _ := startDevice(t, tr, "cam1", nil)
	startDevice(t, tr, "cam2", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	tm.waitEvent(t, "salt/minion/cam2/start", nil)
	waitFor(t, "the devices behind the relay", func() bool { return tr.Stats().Devices == 2 })
	got, _, _ := tm.publish(t, "cam*", "test.ping", 20)
	if want := []string{"cam1", "cam2"}; !cmp.Equal(got, want) {
		t.Fatalf("test.ping cam*: returned %v, want %v", got, want)
	}
	sendEvents(t, cam, "site/order", 0, 10)
	tm.waitInOrder(t, "site/order", "cam1", 10)
	if st := tr.Stats(); st.Batches != 0 {
		t.Errorf("relay stats %+v: want no batches to a capability-5 master", st)
	}
}

// TestRelayBatchOrderAfterMasterRestart: events a device sends while the
// master is away, and right after it is back, reach it in order: what
// was held (by the relay, or by the device if the master's goodbye
// reached it) goes before what comes next.
func TestRelayBatchOrderAfterMasterRestart(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	cam, _ := startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	if err := tm.run.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the relay to see the master go", func() bool { return !tr.Stats().Upstream })
	const held, after = 20, 20
	sendEvents(t, cam, "site/order", 0, held)
	tm.mu.Lock()
	tm.seen = nil
	tm.mu.Unlock()
	tm.boot(t)
	waitFor(t, "the link back", func() bool { return tr.Stats().Upstream })
	sendEvents(t, cam, "site/order", held, after)
	tm.waitInOrder(t, "site/order", "cam1", held+after)
}

// rawLink is a relay link to the master spoken by hand, to send what a
// relay never would.
type rawLink struct {
	conn *quic.Conn
	ctrl *protocol.Framer
}

// dialLink opens a relay link to tm as id (auto_accept must let it in).
func dialLink(t *testing.T, tm *testMaster, id string) *rawLink {
	t.Helper()
	ident, conn := dialNew(t, tm.Addr().String())
	l := &rawLink{conn: conn}
	_, l.ctrl = l.open(t, ident, &protocol.Hello{ID: id, Caps: protocol.CapabilityVersion, Relay: true})
	return l
}

// open opens a stream on the link, says hello (hello.KX and KXSig are set
// here, with ident's key) and checks that the master accepts it.
func (l *rawLink) open(t *testing.T, ident *protocol.Identity, hello *protocol.Hello) (*quic.Stream, *protocol.Framer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := l.conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	f := protocol.NewFramer(s, 0)
	kx, _ := protocol.NewKX()
	hello.KX, hello.KXSig = kx.Public(), protocol.SignAgentKX(ident, hello.ID, kx.Public())
	if err := f.Write(hello); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	s.SetReadDeadline(time.Now().Add(waitTimeout))
	msg, err := f.Read()
	s.SetReadDeadline(time.Time{})
	if st, ok := msg.(*protocol.KeyStatus); err != nil || !ok || st.Status != protocol.KeyAccepted {
		t.Fatalf("hello %s: got %#v, %v; want accepted", hello.ID, msg, err)
	}
	return s, f
}

// device opens a device's stream on the link.
func (l *rawLink) device(t *testing.T, id string) (*protocol.Identity, *quic.Stream, *protocol.Framer) {
	t.Helper()
	ident, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	s, f := l.open(t, ident, &protocol.Hello{ID: id, Caps: protocol.CapabilityVersion, Pub: ident.Pub})
	return ident, s, f
}

// endedWith reads f until the master ends it, and returns the error kind.
func endedWith(t *testing.T, f *protocol.Framer) protocol.Kind {
	t.Helper()
	for {
		msg, err := f.Read()
		if err != nil {
			var ae *quic.ApplicationError
			if errors.As(err, &ae) {
				return protocol.Kind(ae.ErrorCode)
			}
			var se *quic.StreamError
			if errors.As(err, &se) {
				return protocol.Kind(se.ErrorCode)
			}
			t.Fatalf("ended with %v, want an error kind", err)
		}
		if e, ok := msg.(*protocol.Error); ok {
			return e.Kind
		}
	}
}

// signedReturn is a return of id for jid, signed with ident's key and
// encoded as a frame body.
func signedReturn(t *testing.T, ident *protocol.Identity, id, jid string, seq uint64) []byte {
	t.Helper()
	ret, err := protocol.SignReturn(ident.Priv, &protocol.ReturnBody{ID: id, JID: jid, Fun: "test.ping", Return: true, Success: true})
	if err != nil {
		t.Fatal(err)
	}
	ret.Seq = seq
	b, err := protocol.Encode(ret)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMasterBatchForeignItems: a relay's batch items reach only the
// sessions of that relay's own devices, on the streams they name: items
// naming a device of another relay, a direct agent, an unknown id, or one
// of its devices on another stream are ignored, even well signed, and the
// sessions they name go on.
func TestMasterBatchForeignItems(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	cam, _ := startDevice(t, tr, "cam1", nil)
	web, _ := startDeviceCfg(t, agentConfig(t, "web1", tm.Addr().String()))
	tm.waitEvent(t, "salt/minion/cam1/start", nil)
	tm.waitEvent(t, "salt/minion/web1/start", nil)

	evil := dialLink(t, tm, "evil")
	dev, ds, df := evil.device(t, "dev9")
	const jid = "20261123000000000001"
	ghost, _ := protocol.GenerateIdentity()
	items := []protocol.BatchItem{
		{ID: "cam1", Stream: uint64(ds.StreamID()), Frame: signedReturn(t, cam.Identity(), "cam1", jid, 1)},
		{ID: "web1", Stream: uint64(ds.StreamID()), Frame: signedReturn(t, web.Identity(), "web1", jid, 1)},
		{ID: "ghost", Stream: uint64(ds.StreamID()), Frame: signedReturn(t, ghost, "ghost", jid, 1)},
		{ID: "dev9", Stream: uint64(ds.StreamID()) + 4, Frame: signedReturn(t, dev, "dev9", "20261123000000000002", 1)},
		{ID: "dev9", Stream: uint64(ds.StreamID()), Frame: signedReturn(t, dev, "dev9", jid, 5)},
	}
	if err := evil.ctrl.Write(&protocol.Batch{Items: items}); err != nil {
		t.Fatal(err)
	}
	// The batch is handled in order: once dev9's return is announced, the
	// others were ignored.
	tm.waitEvent(t, "salt/job/"+jid+"/ret/dev9", nil)
	tm.mu.Lock()
	for _, ev := range tm.seen {
		if strings.HasPrefix(ev.Tag, "salt/job/2026112300000000000") && ev.Tag != "salt/job/"+jid+"/ret/dev9" {
			t.Errorf("master announced %s from relay evil's batch", ev.Tag)
		}
	}
	tm.mu.Unlock()
	// dev9's return is acknowledged on its stream.
	ds.SetReadDeadline(time.Now().Add(waitTimeout))
	for {
		msg, err := df.Read()
		if err != nil {
			t.Fatalf("dev9 waiting for its ack: %v", err)
		}
		if ack, ok := msg.(*protocol.Ack); ok {
			if ack.Seq != 5 {
				t.Errorf("dev9 ack: got seq %d, want 5", ack.Seq)
			}
			break
		}
	}
	got, _, _ := tm.publish(t, "L@cam1,web1", "test.ping", 20)
	if want := []string{"cam1", "web1"}; !cmp.Equal(got, want) {
		t.Errorf("test.ping after the foreign items: returned %v, want %v", got, want)
	}
}

// TestMasterBatchBadItems: a batch item that does not decode, or that is
// no return or event, or does not verify, ends its device's session with
// that kind; the link and its other devices go on, and a batch that does
// not decode ends the link and nothing else.
func TestMasterBatchBadItems(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	startDevice(t, tr, "cam1", nil)
	tm.waitEvent(t, "salt/minion/cam1/start", nil)

	evil := dialLink(t, tm, "evil")
	good, gs, _ := evil.device(t, "good")
	other, _ := protocol.GenerateIdentity()
	ping, _ := protocol.Encode(&protocol.Ping{Seq: 1})
	for i, tc := range []struct {
		name  string
		frame func(dev *protocol.Identity, id string) []byte
		want  protocol.Kind
	}{
		{"garbage", func(*protocol.Identity, string) []byte { return []byte{byte(protocol.TypeReturn), 0xa1} }, protocol.KindMalformed},
		{"empty", func(*protocol.Identity, string) []byte { return nil }, protocol.KindMalformed},
		{"ping", func(*protocol.Identity, string) []byte { return ping }, protocol.KindUnexpected},
		{"another key", func(_ *protocol.Identity, id string) []byte {
			return signedReturn(t, other, id, "20261123000000000003", 1)
		}, protocol.KindBadSig},
		{"another id", func(dev *protocol.Identity, _ string) []byte {
			return signedReturn(t, dev, "good", "20261123000000000003", 1)
		}, protocol.KindWrongID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("bad%d", i)
			dev, s, f := evil.device(t, id)
			jid := fmt.Sprintf("2026112300000000010%d", i)
			if err := evil.ctrl.Write(&protocol.Batch{Items: []protocol.BatchItem{
				{ID: id, Stream: uint64(s.StreamID()), Frame: tc.frame(dev, id)},
				{ID: id, Stream: uint64(s.StreamID()), Frame: signedReturn(t, dev, id, jid, 2)}, // after the bad one: not handled
				{ID: "good", Stream: uint64(gs.StreamID()), Frame: signedReturn(t, good, "good", jid, uint64(i+1))},
			}}); err != nil {
				t.Fatal(err)
			}
			if k := endedWith(t, f); k != tc.want {
				t.Errorf("%s's session ended with %q, want %q", id, k, tc.want)
			}
			tm.waitEvent(t, "salt/job/"+jid+"/ret/good", nil)
			tm.mu.Lock()
			for _, ev := range tm.seen {
				if ev.Tag == "salt/job/"+jid+"/ret/"+id {
					t.Errorf("master announced %s, after a bad item of the same device", ev.Tag)
				}
			}
			tm.mu.Unlock()
		})
	}

	// A batch that does not decode ends the link.
	if err := evil.ctrl.WriteFrame([]byte{byte(protocol.TypeBatch), 0xa1, 0x01, 0x80}); err != nil {
		t.Fatal(err)
	}
	if k := endedWith(t, evil.ctrl); k != protocol.KindMalformed {
		t.Errorf("link after a malformed batch: ended with %q, want %q", k, protocol.KindMalformed)
	}
	got, _, _ := tm.publish(t, "cam1", "test.ping", 20)
	if want := []string{"cam1"}; !cmp.Equal(got, want) {
		t.Errorf("test.ping through the other relay: returned %v, want %v", got, want)
	}
}

// TestRelayDropsUnbatchable: a return too large to fit a batch frame
// (an agent never sends one) drops its device, as a frame over the limit
// would.
func TestRelayDropsUnbatchable(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", nil, nil)
	d, msg := dialRaw(t, tr, "big1")
	if st, ok := msg.(*protocol.KeyStatus); !ok || st.Status != protocol.KeyAccepted {
		t.Fatalf("big1 hello: got %#v, want accepted", msg)
	}
	ret := &protocol.Return{Signed: protocol.Signed{Body: make([]byte, maxItemFrame), Sig: make([]byte, 64)}, Seq: 1}
	if err := d.f.Write(ret); err != nil {
		t.Fatal(err)
	}
	if k := d.closedWith(t); k != protocol.KindTooLarge {
		t.Errorf("device sending a return of %d bytes: closed with %q, want %q", maxItemFrame, k, protocol.KindTooLarge)
	}
}
