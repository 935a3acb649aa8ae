package agent

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// stateJobBody is the master's answer to a StateGet of cam-01 (as
// master/statecall.go compileFor signs it).
func stateJobBody(jid, nonce string) *protocol.JobBody {
	return &protocol.JobBody{JID: jid, Tgt: "cam-01", TgtType: "glob", Fun: "state.apply", Master: "m1",
		Kwarg: map[string]any{"__nonce__": nonce, "__for__": []any{"cam-01"},
			"__state__": map[string]any{"low": []any{}, "errors": []any{}}}}
}

// The agent refuses any answer to its StateGet that the master did not
// sign for this request and this device alone: a relay may forward it,
// and must not be able to give one device what was compiled for another,
// or replay an older compile.
func TestCheckStateJob(t *testing.T) {
	a := newTestAgent(t, "cam-01", nil, nil)
	key := fakeMasterKey(t, a)
	other, err := protocol.GenerateIdentity()
	if err != nil {
		t.Fatal(err)
	}
	const nonce = "00112233445566778899aabbccddeeff"
	for _, tc := range []struct {
		name   string
		key    *protocol.Identity
		change func(b *protocol.JobBody)
		want   string // "" accepted, else in the error
	}{
		{"the master's answer", key, func(*protocol.JobBody) {}, ""},
		{"signed by another key", other, func(*protocol.JobBody) {}, "signature"},
		{"another function", key, func(b *protocol.JobBody) { b.Fun = "state.sls" }, "not state.apply"},
		{"another request's nonce", key, func(b *protocol.JobBody) { b.Kwarg["__nonce__"] = "ff" + nonce[2:] }, "nonce"},
		{"no nonce (a published job)", key, func(b *protocol.JobBody) { delete(b.Kwarg, "__nonce__") }, "nonce"},
		{"compiled for another device", key, func(b *protocol.JobBody) { b.Kwarg["__for__"] = []any{"cam-02"} }, "not for cam-01 alone"},
		{"compiled for several", key, func(b *protocol.JobBody) { b.Kwarg["__for__"] = []any{"cam-01", "cam-02"} }, "not for cam-01 alone"},
		{"targeted elsewhere", key, func(b *protocol.JobBody) { b.Tgt = "*" }, "not for cam-01 alone"},
		{"no states", key, func(b *protocol.JobBody) { delete(b.Kwarg, "__state__") }, "no compiled states"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := stateJobBody("20260101000000000001", nonce)
			tc.change(b)
			_, err := a.checkStateJob(signJob(t, tc.key, b), "state.apply", nonce)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want accepted", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// stateGet end to end in the agent: the StateGet goes out with a nonce,
// the signed answer comes back, the job's jid is recorded (a relay that
// delivers the same signed job as a published one gets nothing run), and
// halite-call's return goes out under that jid, once.
func TestStateGetFlow(t *testing.T) {
	a := newTestAgent(t, "cam-01", nil, func(c *config.Agent) { c.Master = []string{"127.0.0.1:1"} })
	key := fakeMasterKey(t, a)
	a.mine.setCaps(a.out, protocol.CapStateCall)

	type answer struct {
		ret map[string]any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ret, err := a.stateGet(context.Background(), "state.apply", []any{"web"}, map[string]any{"test": true})
		done <- answer{ret, err}
	}()
	var get *protocol.StateGet
	waitFor(t, "StateGet queued", func() bool {
		a.out.mu.Lock()
		defer a.out.mu.Unlock()
		for _, m := range a.out.q {
			if g, ok := m.(*protocol.StateGet); ok {
				get = g
				return true
			}
		}
		return false
	})
	if get.Fun != "state.apply" || len(get.Nonce) != 16 || get.Arg[0] != "web" || get.Kwarg["test"] != true {
		t.Fatalf("StateGet = %+v", get)
	}
	// An answer to another request, then one with the wrong nonce.
	a.stateReply(&protocol.StateJob{Req: get.Req + 1, Err: "not this one"})
	job := signJob(t, key, stateJobBody("20260101000000000007", hex.EncodeToString(get.Nonce)))
	a.stateReply(&protocol.StateJob{Req: get.Req, Job: job.Signed})
	var got answer
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("stateGet did not return")
	}
	if got.err != nil || got.ret["jid"] != "20260101000000000007" {
		t.Fatalf("stateGet = %v, %v", got.ret, got.err)
	}
	if kw, _ := got.ret["kwarg"].(map[string]any); kw["__state__"] == nil {
		t.Errorf("stateGet kwarg has no __state__: %v", got.ret)
	}

	// The same signed job delivered as a published one: refused.
	a.handleJob(context.Background(), job)
	a.jobWG.Wait()
	if n := queued(a, protocol.TypeReturn); n != 0 {
		t.Fatalf("the halite-call job replayed as a published job ran: %d returns", n)
	}
	// halite-call's return: queued once, for that jid only.
	if err := a.stateReturn(map[string]any{"jid": "20260101000000000008", "fun": "state.apply"}); err == nil {
		t.Errorf("a return for a jid no state.get gave was taken")
	}
	ret := map[string]any{"jid": "20260101000000000007", "fun": "state.apply", "return": map[string]any{},
		"retcode": int64(0), "success": true}
	if err := a.stateReturn(ret); err != nil {
		t.Fatalf("stateReturn: %v", err)
	}
	if err := a.stateReturn(ret); err == nil {
		t.Errorf("a second return for the same jid was taken")
	}
	if n := queued(a, protocol.TypeReturn); n != 1 {
		t.Errorf("got %d returns queued, want 1", n)
	}
}
