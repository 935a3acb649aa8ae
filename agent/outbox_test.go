package agent

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// TestOutboxAcrossRestart: an event made while the master does not accept
// the agent survives the agent's restart, is delivered once accepted, and
// leaves the spool only when the master acknowledges it.
func TestOutboxAcrossRestart(t *testing.T) {
	m, sock, sub := startMaster(t)
	a := newTestAgent(t, "keep1", nil, func(c *config.Agent) { c.Master = []string{m.Addr().String()} })
	stop := runUntilStopped(t, "agent", a.Run)
	waitEvent(t, sub, event.TagAuth)
	if err := a.SendEvent("dev/kept", map[string]any{"n": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("agent Run: %v", err)
	}

	a2, err := New(a.cfg, zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named("agent.keep1.2"))
	if err != nil {
		t.Fatalf("New after a restart: %v", err)
	}
	if n := queued(a2, protocol.TypeEvent); n != 1 {
		t.Fatalf("events waiting after a restart: got %d, want 1", n)
	}
	runUntilStopped(t, "agent2", a2.Run)
	call(t, sock, &api.Request{Op: api.OpWheel, Fun: "key.accept", Arg: []any{"keep1"}})
	ev := waitEvent(t, sub, "dev/kept")
	if d, _ := ev.Data["data"].(map[string]any); ev.Data["id"] != "keep1" || d["n"] != "1" {
		t.Errorf("event after a restart: got %v, want id keep1, data {n: 1}", ev.Data)
	}
	waitFor(t, "the master's ack to empty the spool", func() bool { return a2.out.spool.len() == 0 })
}
