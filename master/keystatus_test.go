package master

import (
	"sync/atomic"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// TestNothingBeforeKeyStatus: a frame sent to a direct agent once its
// session is attached but before its KeyStatus is written (a job published
// at that moment) reaches the agent after the status, so the agent keeps
// its first session and answers. An agent reads the status first and
// drops a session that sends anything else before it (agent/session.go).
func TestNothingBeforeKeyStatus(t *testing.T) {
	var attached atomic.Int32
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, func(m *Master) {
		m.afterAttach = func(s *session) {
			attached.Add(1)
			b, err := protocol.Encode(&protocol.Ping{})
			if err != nil {
				t.Error(err)
				return
			}
			if !s.send(b) {
				t.Error("send to the attached session failed")
			}
		}
	})
	tm.startAgent(t, "early1", nil)
	tm.waitConnected(t, "early1")
	res := tm.publish(t, &api.Request{Tgt: "early1", Fun: "test.ping"})
	if _, rets, _ := returnsOf(t, res); rets["early1"]["return"] != true {
		t.Fatalf("test.ping: returns %v, want early1's true", rets)
	}
	if n := attached.Load(); n != 1 {
		t.Errorf("the agent's session was attached %d times, want 1 (its first session dropped for a frame before the status)", n)
	}
}
