package master

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
)

func TestMain(m *testing.M) {
	// Job ids are local time by default (Salt's utc_jid: False). Run in a
	// zone west of UTC so that code mixing local job ids with UTC times
	// fails here, not only on masters in the Americas.
	time.Local = time.FixedZone("UTC-5", -5*60*60)
	// protocol.Pump's workers wait a while for the next pump before they end.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/halite-fleet/halite/protocol.pumpWorker"))
}

// returnsOf splits a publish's responses into the job, the returns by id
// and the final response.
func returnsOf(t *testing.T, rs []*api.Response) (job *api.Response, rets map[string]map[string]any, done *api.Response) {
	t.Helper()
	rets = map[string]map[string]any{}
	for _, r := range rs {
		switch r.Kind {
		case api.KindJob:
			job = r
		case api.KindReturn:
			id, _ := r.Data["id"].(string)
			if _, dup := rets[id]; dup {
				t.Errorf("two returns from %s", id)
			}
			rets[id] = r.Data
		case api.KindDone:
			done = r
		case api.KindError:
			t.Fatalf("publish failed: %s (code %d)", r.Error, r.Code)
		}
	}
	if job == nil || done == nil {
		t.Fatalf("got responses %+v, want a job, returns and done", rs)
	}
	return job, rets, done
}

func TestEnrolment(t *testing.T) {
	tm := startMaster(t, nil, nil)
	a := tm.startAgent(t, "enrol1", nil)

	tm.events.wait(t, event.TagAuth, idIs("enrol1", "act", "pend", "result", true))
	all := dict(t, tm.wheel(t, "key.list_all"))
	if got := strs(t, all["minions_pre"]); !slices.Equal(got, []string{"enrol1"}) {
		t.Errorf("pending keys: got %v, want [enrol1]", got)
	}
	if got := strs(t, all["minions"]); len(got) != 0 {
		t.Errorf("accepted keys: got %v, want none", got)
	}
	rs := tm.publish(t, &api.Request{Tgt: "enrol1", Fun: "test.ping"})
	if len(rs) != 1 || rs[0].Kind != api.KindError || rs[0].Code != api.CodeNoMinions {
		t.Fatalf("publish to a pending minion: got %+v, want one error with code %d", rs[0], api.CodeNoMinions)
	}

	got := tm.wheel(t, "key.accept", "enrol1")
	if d := cmp.Diff(map[string]any{"minions": []any{"enrol1"}}, got); d != "" {
		t.Errorf("key.accept (-want +got):\n%s", d)
	}
	tm.events.wait(t, event.TagKey, idIs("enrol1", "act", "accept"))
	tm.events.wait(t, event.TagAuth, idIs("enrol1", "act", "accept", "result", true))
	start := tm.events.wait(t, "salt/minion/enrol1/start", idIs("enrol1"))
	if start["tag"] != "salt/minion/enrol1/start" || start["cmd"] != "_minion_event" {
		t.Errorf("start event: got %v, want tag salt/minion/enrol1/start and cmd _minion_event", start)
	}
	tm.events.wait(t, event.TagMinionStartOld, idIs("enrol1", "tag", "minion_start"))
	pres := tm.events.wait(t, event.TagPresenceChange, func(d map[string]any) bool {
		return slices.Contains(d["new"].([]any), any("enrol1"))
	})
	if got := pres["lost"].([]any); len(got) != 0 {
		t.Errorf("presence change lost: got %v, want none", got)
	}
	tm.waitConnected(t, "enrol1")

	job, rets, done := returnsOf(t, tm.publish(t, &api.Request{Tgt: "enrol1", Fun: "test.ping"}))
	if !slices.Equal(job.Minions, []string{"enrol1"}) {
		t.Errorf("job minions: got %v, want [enrol1]", job.Minions)
	}
	if r := rets["enrol1"]; r["return"] != true || r["success"] != true || r["jid"] != job.JID || r["fun"] != "test.ping" {
		t.Errorf("return: got %v, want return true, success true, jid %s, fun test.ping", r, job.JID)
	}
	if len(done.Missing) != 0 {
		t.Errorf("done missing: got %v, want none", done.Missing)
	}

	finger := tm.wheel(t, "key.finger", "enrol1")
	want := map[string]any{"minions": map[string]any{"enrol1": a.Fingerprint()}}
	if d := cmp.Diff(want, finger); d != "" {
		t.Errorf("key.finger (-want +got):\n%s", d)
	}
}

func TestPublishTargets(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "web1", map[string]any{"role": "web", "site": "paris"})
	tm.startAgent(t, "web2", map[string]any{"role": "web", "site": "lyon"})
	tm.startAgent(t, "db1", map[string]any{"role": "db", "site": "paris"})
	tm.waitConnected(t, "web1", "web2", "db1")

	tests := []struct {
		name, tgt, tgtType string
		want               []string
	}{
		{"glob", "web*", "", []string{"web1", "web2"}},
		{"glob all", "*", "glob", []string{"db1", "web1", "web2"}},
		{"list", "web1,db1,nosuch", "list", []string{"db1", "web1"}},
		{"grain", "role:db", "grain", []string{"db1"}},
		{"grain glob", "site:par*", "grain", []string{"db1", "web1"}},
		{"pcre", "^web[0-9]$", "pcre", []string{"web1", "web2"}},
		{"compound", "G@role:web and not web2", "compound", []string{"web1"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := fmt.Sprintf("hello %d", i)
			job, rets, done := returnsOf(t, tm.publish(t, &api.Request{
				Tgt: tt.tgt, TgtType: tt.tgtType, Fun: "test.echo", Arg: []any{text},
			}))
			if !slices.Equal(job.Minions, tt.want) {
				t.Errorf("minions: got %v, want %v", job.Minions, tt.want)
			}
			if !event.IsJID(job.JID) {
				t.Errorf("jid: got %q, want a job id", job.JID)
			}
			for _, id := range tt.want {
				r, ok := rets[id]
				if !ok {
					t.Errorf("no return from %s", id)
					continue
				}
				if r["return"] != text || r["jid"] != job.JID || r["fun"] != "test.echo" || r["success"] != true {
					t.Errorf("return of %s: got %v, want return %q, jid %s, fun test.echo, success", id, r, text, job.JID)
				}
			}
			if len(rets) != len(tt.want) {
				t.Errorf("got returns from %d minions, want %d", len(rets), len(tt.want))
			}
			if len(done.Missing) != 0 || len(done.NotConnected) != 0 {
				t.Errorf("done: got missing %v, not connected %v, want none", done.Missing, done.NotConnected)
			}
			newEv := tm.events.wait(t, event.TagJobNew(job.JID), nil)
			if d := cmp.Diff(tt.want, newEv["minions"]); d != "" || newEv["fun"] != "test.echo" {
				t.Errorf("%s: got %v, want fun test.echo and minions %v", event.TagJobNew(job.JID), newEv, tt.want)
			}
		})
	}

	t.Run("no minions", func(t *testing.T) {
		rs := tm.publish(t, &api.Request{Tgt: "nosuch*", Fun: "test.ping"})
		if len(rs) != 1 || rs[0].Kind != api.KindError || rs[0].Code != api.CodeNoMinions || rs[0].JID != "" {
			t.Fatalf("got %+v, want one error with code %d and no jid", rs[0], api.CodeNoMinions)
		}
	})
	t.Run("preview", func(t *testing.T) {
		rs := tm.publish(t, &api.Request{Tgt: "role:web", TgtType: "grain", Fun: "test.ping", Preview: true})
		if len(rs) != 1 || !slices.Equal(rs[0].Minions, []string{"web1", "web2"}) || rs[0].JID != "" {
			t.Fatalf("got %+v, want minions [web1 web2] and no jid", rs[0])
		}
	})
	t.Run("bad target", func(t *testing.T) {
		rs := tm.publish(t, &api.Request{Tgt: "G@role:web and and", TgtType: "compound", Fun: "test.ping"})
		if len(rs) != 1 || rs[0].Kind != api.KindError || rs[0].Code != api.CodeBadRequest {
			t.Fatalf("got %+v, want one error with code %d", rs[0], api.CodeBadRequest)
		}
	})
}

func TestMissingReturns(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "up1", nil)
	down := tm.startAgent(t, "down1", nil)
	tm.waitConnected(t, "up1", "down1")
	// Presence is reported per tick: a minion that came and went within
	// one tick is neither new nor lost, so wait for it to be seen first.
	tm.events.wait(t, event.TagPresenceChange, func(d map[string]any) bool {
		return slices.Contains(d["new"].([]any), any("down1"))
	})

	if err := down.stop(); err != nil {
		t.Fatalf("stop down1: %v", err)
	}
	waitFor(t, "down1 to disconnect", func() bool { return tm.minions.session("down1") == nil })
	tm.events.wait(t, event.TagPresenceChange, func(d map[string]any) bool {
		return slices.Contains(d["lost"].([]any), any("down1"))
	})

	if got := strs(t, tm.run(t, "manage.up")); !slices.Equal(got, []string{"up1"}) {
		t.Errorf("manage.up: got %v, want [up1]", got)
	}
	if got := strs(t, tm.run(t, "manage.down")); !slices.Equal(got, []string{"down1"}) {
		t.Errorf("manage.down: got %v, want [down1]", got)
	}
	want := map[string]any{"up": []any{"up1"}, "down": []any{"down1"}}
	if d := cmp.Diff(want, tm.run(t, "manage.status")); d != "" {
		t.Errorf("manage.status (-want +got):\n%s", d)
	}

	job, rets, done := returnsOf(t, tm.publish(t, &api.Request{Tgt: "*", Fun: "test.ping", Timeout: 1}))
	if !slices.Equal(job.Minions, []string{"down1", "up1"}) || !slices.Equal(job.NotConnected, []string{"down1"}) {
		t.Errorf("job: got minions %v, not connected %v, want [down1 up1], [down1]", job.Minions, job.NotConnected)
	}
	if _, ok := rets["up1"]; !ok || len(rets) != 1 {
		t.Errorf("got returns %v, want one from up1", rets)
	}
	if !slices.Equal(done.Missing, []string{"down1"}) || !slices.Equal(done.NotConnected, []string{"down1"}) {
		t.Errorf("done: got missing %v, not connected %v, want [down1], [down1]", done.Missing, done.NotConnected)
	}

	res, err := tm.call(t, api.OpRunner, "manage.down", nil, map[string]any{"removekeys": true})
	if err != nil {
		t.Fatalf("manage.down removekeys=True: %v", err)
	}
	if got := strs(t, res); !slices.Equal(got, []string{"down1"}) {
		t.Errorf("manage.down removekeys=True: got %v, want [down1]", got)
	}
	if got := strs(t, dict(t, tm.wheel(t, "key.list_all"))["minions"]); !slices.Equal(got, []string{"up1"}) {
		t.Errorf("accepted keys after removekeys: got %v, want [up1]", got)
	}
}

func TestRunners(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	r1 := tm.startAgent(t, "r1", nil)
	tm.waitConnected(t, "r1")

	job, _, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "r1", Fun: "test.echo", Arg: []any{"hi"}}))
	jid := job.JID

	t.Run("lookup_jid", func(t *testing.T) {
		if d := cmp.Diff(map[string]any{"r1": "hi"}, tm.run(t, "jobs.lookup_jid", jid)); d != "" {
			t.Errorf("jobs.lookup_jid (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[string]any{}, tm.run(t, "jobs.lookup_jid", "20000101000000000000")); d != "" {
			t.Errorf("jobs.lookup_jid of an unknown job (-want +got):\n%s", d)
		}
		_, err := tm.call(t, api.OpRunner, "jobs.lookup_jid", []any{"nonsense"}, nil)
		if !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("jobs.lookup_jid nonsense: got %v, want code %d", err, api.CodeBadRequest)
		}
	})
	t.Run("list_jobs", func(t *testing.T) {
		jobs := dict(t, tm.run(t, "jobs.list_jobs"))
		info := dict(t, jobs[jid])
		for k, want := range map[string]any{"Function": "test.echo", "Target": "r1", "Target-type": "glob", "User": "root"} {
			if info[k] != want {
				t.Errorf("list_jobs %s %s: got %v, want %v", jid, k, info[k], want)
			}
		}
		if d := cmp.Diff([]any{"hi"}, info["Arguments"]); d != "" {
			t.Errorf("list_jobs Arguments (-want +got):\n%s", d)
		}
		res, err := tm.call(t, api.OpRunner, "jobs.list_jobs", nil, map[string]any{"search_function": "test.ping"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := dict(t, res)[jid]; ok {
			t.Errorf("list_jobs search_function=test.ping: got %s, want it left out", jid)
		}
	})
	t.Run("print_job", func(t *testing.T) {
		info := dict(t, dict(t, tm.run(t, "jobs.print_job", jid))[jid])
		if d := cmp.Diff([]any{"r1"}, info["Minions"]); d != "" {
			t.Errorf("print_job Minions (-want +got):\n%s", d)
		}
		res := dict(t, dict(t, info["Result"])["r1"])
		if res["return"] != "hi" || res["success"] != true || fmt.Sprint(res["retcode"]) != "0" {
			t.Errorf("print_job Result r1: got %v, want return hi, retcode 0, success", res)
		}
		if d := cmp.Diff(map[string]any{}, tm.run(t, "jobs.print_job", "20000101000000000000")); d != "" {
			t.Errorf("print_job of an unknown job (-want +got):\n%s", d)
		}
	})
	t.Run("event.send", func(t *testing.T) {
		res, err := tm.call(t, api.OpRunner, "event.send", []any{"halite/test/kw"}, map[string]any{"x": "1"})
		if err != nil || res != true {
			t.Fatalf("event.send: got %v, %v, want true", res, err)
		}
		tm.events.wait(t, "halite/test/kw", func(d map[string]any) bool { return d["x"] == "1" })
		if res := tm.run(t, "event.send", "halite/test/dict", map[string]any{"y": "2"}); res != true {
			t.Fatalf("event.send with data: got %v, want true", res)
		}
		tm.events.wait(t, "halite/test/dict", func(d map[string]any) bool { return d["y"] == "2" })
		_, err = tm.call(t, api.OpRunner, "event.send", []any{"halite/test/bad", "notadict"}, nil)
		if !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("event.send with a string as data: got %v, want code %d", err, api.CodeBadRequest)
		}
	})
	t.Run("run events", func(t *testing.T) {
		tm.run(t, "manage.up")
		ev := tm.events.wait(t, "salt/run/*/ret", func(d map[string]any) bool { return d["fun"] == "runner.manage.up" })
		if ev["success"] != true || !event.IsJID(fmt.Sprint(ev["jid"])) {
			t.Errorf("salt/run/<jid>/ret: got %v, want success and a jid", ev)
		}
		tm.events.wait(t, "salt/run/*/new", func(d map[string]any) bool { return d["fun"] == "runner.manage.up" })
	})
	t.Run("unknown", func(t *testing.T) {
		_, err := tm.call(t, api.OpRunner, "jobs.nosuch", nil, nil)
		if !api.IsCode(err, api.CodeBadRequest) {
			t.Errorf("got %v, want code %d", err, api.CodeBadRequest)
		}
	})

	// jobs.active, while a job runs; then the agent must stop cleanly with
	// that job still running.
	rs := tm.publish(t, &api.Request{Tgt: "r1", Fun: "test.sleep", Arg: []any{60}, Async: true})
	if len(rs) != 1 || rs[0].Kind != api.KindJob || !rs[0].Done {
		t.Fatalf("async publish: got %+v, want one job response, done", rs)
	}
	sleepJID := rs[0].JID
	var active map[string]any
	waitFor(t, "jobs.active to list the sleep", func() bool {
		active = dict(t, tm.run(t, "jobs.active"))
		_, ok := active[sleepJID]
		return ok
	})
	entry := dict(t, active[sleepJID])
	running, _ := entry["Running"].([]any)
	if len(running) != 1 || dict(t, running[0])["r1"] == nil || entry["Function"] != "test.sleep" {
		t.Errorf("jobs.active %s: got %v, want Function test.sleep, Running [{r1: pid}]", sleepJID, entry)
	}
	if len(active) != 1 {
		t.Errorf("jobs.active: got %d jobs, want only %s: %v", len(active), sleepJID, active)
	}
	if err := r1.stop(); err != nil {
		t.Errorf("agent stopped while a job runs: %v", err)
	}
}

func TestWheelKeys(t *testing.T) {
	tm := startMaster(t, nil, nil)
	k1 := tm.startAgent(t, "k1", nil)
	k2 := tm.startAgent(t, "k2", nil)
	tm.startAgent(t, "k3", nil)
	for _, id := range []string{"k1", "k2", "k3"} {
		tm.events.wait(t, event.TagAuth, idIs(id, "act", "pend"))
	}
	if d := cmp.Diff(map[string]any{"minions_pre": []any{"k1", "k2", "k3"}}, tm.wheel(t, "key.list", "pre")); d != "" {
		t.Errorf("key.list pre (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"minions_rejected": []any{"k3"}}, tm.wheel(t, "key.reject", "k3")); d != "" {
		t.Errorf("key.reject k3 (-want +got):\n%s", d)
	}
	tm.events.wait(t, event.TagKey, idIs("k3", "act", "reject"))
	// Pending keys only: k3 stays rejected.
	if d := cmp.Diff(map[string]any{"minions": []any{"k1", "k2"}}, tm.wheel(t, "key.accept", "k*")); d != "" {
		t.Errorf("key.accept k* (-want +got):\n%s", d)
	}
	tm.waitConnected(t, "k1", "k2")
	tm.events.wait(t, event.TagAuth, idIs("k3", "act", nil, "result", false))

	want := map[string]any{
		"minions": []any{"k1", "k2"}, "minions_pre": []any{},
		"minions_rejected": []any{"k3"}, "minions_denied": []any{},
	}
	if d := cmp.Diff(want, tm.wheel(t, "key.list_all")); d != "" {
		t.Errorf("key.list_all (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"minions_rejected": []any{"k3"}}, tm.wheel(t, "key.list", "rejected")); d != "" {
		t.Errorf("key.list rejected (-want +got):\n%s", d)
	}
	if _, err := tm.call(t, api.OpWheel, "key.list", []any{"sideways"}, nil); !api.IsCode(err, api.CodeBadRequest) {
		t.Errorf("key.list sideways: got %v, want code %d", err, api.CodeBadRequest)
	}
	fingers := tm.wheel(t, "key.finger", "k[12]")
	wantF := map[string]any{"minions": map[string]any{"k1": k1.Fingerprint(), "k2": k2.Fingerprint()}}
	if d := cmp.Diff(wantF, fingers); d != "" {
		t.Errorf("key.finger k[12] (-want +got):\n%s", d)
	}

	// A rejected agent gets no jobs.
	job, rets, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "*", Fun: "test.ping"}))
	if !slices.Equal(job.Minions, []string{"k1", "k2"}) || len(rets) != 2 {
		t.Errorf("publish *: got minions %v and %d returns, want [k1 k2] and 2", job.Minions, len(rets))
	}
	if tm.minions.session("k3") != nil {
		t.Error("rejected k3 has a live session")
	}

	// Deleting a key drops its live connection; the agent comes back pending.
	s2 := tm.minions.session("k2")
	if d := cmp.Diff(map[string]any{"minions": []any{"k2"}}, tm.wheel(t, "key.delete", "k2")); d != "" {
		t.Errorf("key.delete k2 (-want +got):\n%s", d)
	}
	tm.events.wait(t, event.TagKey, idIs("k2", "act", "delete"))
	waitFor(t, "k2's connection to be dropped", func() bool {
		select {
		case <-s2.done:
			return true
		default:
			return false
		}
	})
	waitFor(t, "k2 to come back pending", func() bool {
		pre := dict(t, tm.wheel(t, "key.list", "pending"))["minions_pre"]
		return slices.Equal(strs(t, pre), []string{"k2"})
	})
	if s := tm.minions.session("k2"); s != nil {
		t.Error("k2 has a live session after its key was deleted")
	}

	// Rejecting an accepted key drops its connection and its jobs.
	s1 := tm.minions.session("k1")
	res, err := tm.call(t, api.OpWheel, "key.reject", []any{"k1"}, map[string]any{"include_accepted": true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]any{"minions_rejected": []any{"k1"}}, res); d != "" {
		t.Errorf("key.reject k1 include_accepted (-want +got):\n%s", d)
	}
	waitFor(t, "k1's connection to be dropped", func() bool {
		select {
		case <-s1.done:
			return true
		default:
			return false
		}
	})
	rs := tm.publish(t, &api.Request{Tgt: "k1", Fun: "test.ping"})
	if rs[0].Code != api.CodeNoMinions {
		t.Errorf("publish to rejected k1: got %+v, want code %d", rs[0], api.CodeNoMinions)
	}
	tm.events.wait(t, event.TagAuth, idIs("k1", "act", nil, "result", false))
	if tm.minions.session("k1") != nil {
		t.Error("rejected k1 has a live session")
	}
}

func TestAgentEvent(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	a := tm.startAgent(t, "ev1", nil)
	tm.waitConnected(t, "ev1")

	if err := a.SendEvent("site/door/open", map[string]any{"door": "front"}); err != nil {
		t.Fatalf("SendEvent: %v", err)
	}
	got := tm.events.wait(t, "site/door/open", nil)
	stamp, _ := got["_stamp"].(string)
	if _, err := time.Parse("2006-01-02T15:04:05.000000", stamp); err != nil {
		t.Errorf("_stamp: got %q, want a Salt time stamp: %v", stamp, err)
	}
	delete(got, "_stamp")
	want := map[string]any{"id": "ev1", "tag": "site/door/open", "data": map[string]any{"door": "front"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("agent event on the master bus (-want +got):\n%s", d)
	}
	if err := a.SendEvent("salt/job/123/ret/ev1", nil); err == nil {
		t.Error("SendEvent under salt/job: got no error, want a refusal")
	}
}

func TestKeepJobs(t *testing.T) {
	// A job made two hours ago, with a local-time jid as the master makes
	// them, and one made now.
	ago := time.Now().Add(-2 * time.Hour)
	oldJID := ago.Format("20060102150405") + fmt.Sprintf("%06d", ago.Nanosecond()/1000)
	var newJID string
	tm := startMaster(t, func(c *config.Master) { c.KeepJobs = 1 }, func(m *Master) {
		newJID = m.jids.Next()
		for _, jid := range []string{oldJID, newJID} {
			if err := m.cache.SaveLoad(&jobcache.Load{JID: jid, Tgt: "*", TgtType: "glob", Fun: "test.ping", StartTime: ago}); err != nil {
				t.Fatal(err)
			}
		}
	})
	waitFor(t, "the old job to be purged", func() bool {
		_, err := tm.cache.GetLoad(oldJID)
		return errors.Is(err, jobcache.ErrNotFound)
	})
	if _, err := tm.cache.GetLoad(newJID); err != nil {
		t.Errorf("the new job %s: got %v, want it kept", newJID, err)
	}
}

func TestShutdownWithAgents(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	ids := []string{"s1", "s2", "s3"}
	for _, id := range ids {
		tm.startAgent(t, id, nil)
	}
	tm.waitConnected(t, ids...)
	start := time.Now()
	if err := tm.stop(); err != nil {
		t.Fatalf("master Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("master took %v to stop, want under 5s", d)
	}
	if got := tm.minions.connected(); len(got) != 0 {
		t.Errorf("sessions after Run returned: got %v, want none", got)
	}
}

// TestJobOutlivesConnection drops an agent's connection while it runs a
// job: the job goes on, and its return reaches the master once the agent
// is back, as a Salt minion's would.
func TestJobOutlivesConnection(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "blip1", nil)
	tm.waitConnected(t, "blip1")
	rs := tm.publish(t, &api.Request{Tgt: "blip1", Fun: "test.sleep", Arg: []any{2}, Async: true})
	jid := rs[0].JID
	waitFor(t, "blip1 to run "+jid, func() bool {
		_, ok := dict(t, tm.run(t, "jobs.active"))[jid]
		return ok
	})
	s := tm.minions.session("blip1")
	s.close(protocol.KindOther, "test drops the connection")
	waitFor(t, "blip1 to reconnect", func() bool {
		n := tm.minions.session("blip1")
		return n != nil && n != s
	})
	var got any
	waitFor(t, "the return of "+jid, func() bool {
		got = tm.run(t, "jobs.lookup_jid", jid)
		return len(dict(t, got)) > 0
	})
	if d := cmp.Diff(map[string]any{"blip1": true}, got); d != "" {
		t.Errorf("jobs.lookup_jid after a reconnect (-want +got):\n%s", d)
	}
}

// TestWheelKeysRelays: the key listings name the relay a pending key came
// through, beside Salt's four lists and only for pending keys.
func TestWheelKeysRelays(t *testing.T) {
	tm := startMaster(t, nil, nil)
	for _, k := range []struct{ id, via string }{{"d1", "r1"}, {"d2", ""}, {"d3", "r2"}} {
		id, err := protocol.GenerateIdentity()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.keys.Check(k.id, id.Pub, k.via); err != nil {
			t.Fatalf("Check %s: %v", k.id, err)
		}
	}
	if _, err := tm.keys.Accept("d3", false, false); err != nil {
		t.Fatal(err)
	}
	relays := map[string]any{"d1": "r1"}
	want := map[string]any{
		"minions": []any{"d3"}, "minions_pre": []any{"d1", "d2"}, "minions_rejected": []any{}, "minions_denied": []any{},
		"relays": relays,
	}
	if d := cmp.Diff(want, tm.wheel(t, "key.list_all")); d != "" {
		t.Errorf("key.list_all (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"minions_pre": []any{"d1", "d2"}, "relays": relays}, tm.wheel(t, "key.list", "un")); d != "" {
		t.Errorf("key.list un (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]any{"minions": []any{"d3"}}, tm.wheel(t, "key.list", "acc")); d != "" {
		t.Errorf("key.list acc (-want +got):\n%s", d)
	}
	f := dict(t, tm.wheel(t, "key.finger", "d*"))
	if d := cmp.Diff(relays, f["relays"]); d != "" {
		t.Errorf("key.finger d* relays (-want +got):\n%s", d)
	}
	if f = dict(t, tm.wheel(t, "key.finger", "d2")); f["relays"] != nil {
		t.Errorf("key.finger d2: got relays %v, want none", f["relays"])
	}
}
