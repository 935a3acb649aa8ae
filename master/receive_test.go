package master

import (
	"context"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/protocol"
)

// TestReceiveRules: the replay, store and ack rules are the same for a
// message on its device's stream (handle) and in its relay's batch
// (handleBatch). The session resumes one that handled up to seq 2 (a
// relay's link dropped before its ack): items 1 and 2 are acknowledged
// again and not handled twice (no event, not stored); item 3 is handled
// and acknowledged.
func TestReceiveRules(t *testing.T) {
	for _, path := range []string{"stream", "batch"} {
		t.Run("path="+path, func(t *testing.T) {
			tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
			l, sessions := benchLink(t, tm.Master, 1)
			s := sessions[0]
			s.handled = 2
			const jid = "20261124050000000001"
			ret := func(seq uint64, jid string) []byte {
				r, err := protocol.MACReturn(s.mac, &protocol.ReturnBody{ID: s.id, JID: jid, Fun: "test.ping", Return: true, Success: true, Stamp: "s"})
				if err != nil {
					t.Fatal(err)
				}
				r.Seq = seq
				b, err := protocol.Encode(r)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			ev := func(seq uint64, tag string) []byte {
				e, err := protocol.MACEvent(s.mac, &protocol.EventBody{ID: s.id, Tag: tag, Stamp: "s"})
				if err != nil {
					t.Fatal(err)
				}
				e.Seq = seq
				b, err := protocol.Encode(e)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			frames := [][]byte{ev(1, "replay/old"), ret(2, jid), ev(3, "replay/new")}
			switch path {
			case "stream":
				for _, f := range frames {
					msg, err := protocol.Decode(f)
					if err != nil {
						t.Fatal(err)
					}
					if err := tm.handle(context.Background(), s, msg); err != nil {
						t.Fatalf("handle: %v", err)
					}
				}
			case "batch":
				b := &protocol.Batch{}
				for _, f := range frames {
					b.Items = append(b.Items, protocol.BatchItem{ID: s.id, Stream: uint64(s.streamID), Frame: f})
				}
				tm.handleBatch(l, b)
			}
			tm.events.wait(t, "replay/new", nil)
			for _, e := range tm.events.seen {
				if e.Tag == "replay/old" || e.Tag == event.TagJobRet(jid, s.id) {
					t.Errorf("replayed item handled again: event %s", e.Tag)
				}
			}
			if rets, _ := tm.cache.GetReturns(jid); len(rets) != 0 {
				t.Errorf("replayed return stored: %v", rets)
			}
			if got := s.toAck.Load(); got != 3 {
				t.Errorf("acknowledged up to %d, want 3", got)
			}
			if s.isClosed() {
				t.Error("session closed")
			}
		})
	}
}
