package master

import (
	"errors"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// TestPublishRefusesUnstorable: a job the job cache could not read back,
// or a device could not receive, is refused with an error to the caller
// (the reactor, which publishes in-process, logs it) and neither stored
// nor sent. The local socket's decoder refuses the first and last before
// publish; the reactor's data has no such gate.
func TestPublishRefusesUnstorable(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "web1", nil)
	tm.waitConnected(t, "web1")
	many := make([]any, protocol.MaxElements+1)
	for i := range many {
		many[i] = "a"
	}
	tests := []struct {
		name string
		req  *api.Request
		want string
	}{
		{"too many arguments", &api.Request{Tgt: "web1", Fun: "test.arg", Arg: many}, "the job cache could not read it back"},
		{"larger than a frame", &api.Request{Tgt: "web1", Fun: "test.echo", Arg: []any{strings.Repeat("x", protocol.DefaultMaxFrame)}}, "more than the"},
		{"invalid UTF-8", &api.Request{Tgt: "web1", Fun: "test.echo", Kwarg: map[string]any{"text": "a\xffb"}}, "could not read it back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tm.Master.publish(tm.jids.Next(), tt.req)
			var re *api.RemoteError
			if !errors.As(err, &re) || re.Code != api.CodeBadRequest || !strings.Contains(re.Msg, tt.want) {
				t.Fatalf("got %v, %v; want a bad-request error saying %q", p, err, tt.want)
			}
		})
	}
	if jobs := dict(t, tm.run(t, "jobs.list_jobs")); len(jobs) != 0 {
		t.Errorf("jobs.list_jobs: got %d jobs, want none stored", len(jobs))
	}
}
