package master

import (
	"errors"
	"fmt"
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

// TestPublishCompound: a compound publication (a list "fun", one argument
// list per function: LocalClient.cmd in salt/client/__init__.py) is
// refused unless its parts agree, and otherwise signed into one job whose
// load and salt/job/<jid>/new carry Salt's list "fun" and list-of-lists
// "arg".
func TestPublishCompound(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "web1", nil)
	tm.waitConnected(t, "web1")
	funs := []string{"test.echo", "test.ping"}
	for _, tt := range []struct {
		name string
		req  *api.Request
	}{
		{"fun not the join", &api.Request{Tgt: "web1", Fun: "test.ping", Funs: funs}},
		{"arg outside the functions", &api.Request{Tgt: "web1", Fun: "test.echo,test.ping", Funs: funs, Arg: []any{"x"}}},
		{"kwarg outside the functions", &api.Request{Tgt: "web1", Fun: "test.echo,test.ping", Funs: funs, Kwarg: map[string]any{"x": 1}}},
		{"too few argument lists", &api.Request{Tgt: "web1", Fun: "test.echo,test.ping", Funs: funs, FunArgs: [][]any{{"a"}}}},
		{"too many kwarg maps", &api.Request{Tgt: "web1", Fun: "test.echo,test.ping", Funs: funs, FunKwargs: []map[string]any{nil, nil, nil}}},
		{"argument lists without functions", &api.Request{Tgt: "web1", Fun: "test.ping", FunArgs: [][]any{{}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := tm.publish(t, tt.req)
			if len(rs) != 1 || rs[0].Kind != api.KindError || rs[0].Code != api.CodeBadRequest {
				t.Fatalf("got %+v, want one bad-request error", rs[0])
			}
		})
	}
	rs := tm.publish(t, &api.Request{Tgt: "web1", Funs: []string{"test.echo", "test.arg"}, FunArgs: [][]any{{"hi"}, {}},
		FunKwargs: []map[string]any{nil, {"k": "v"}}})
	var ret map[string]any
	for _, r := range rs {
		if r.Kind == api.KindReturn {
			ret = r.Data
		}
	}
	if ret == nil {
		t.Fatalf("no return: %+v", rs)
	}
	if got, want := fmt.Sprint(ret["return"]), "map[test.arg:map[args:[] kwargs:map[k:v]] test.echo:hi]"; got != want {
		t.Errorf("return: got %s, want %s", got, want)
	}
	if ret["fun"] != "test.echo,test.arg" {
		t.Errorf("return's fun: got %v, want test.echo,test.arg", ret["fun"])
	}
	jid := rs[0].JID
	newJob := tm.events.wait(t, "salt/job/"+jid+"/new", nil)
	if got, want := fmt.Sprint(newJob["fun"], newJob["arg"]), "[test.echo test.arg] [[hi] [map[__kwarg__:true k:v]]]"; got != want {
		t.Errorf("salt/job/%s/new fun and arg: got %s, want %s", jid, got, want)
	}
}
