package master

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
)

// TestSaltEventFields: the fields of the master's events are Salt 3006's,
// each from the Salt file cited:
//
//   - salt/auth: _auth in salt/channel/server.py. result is True for act
//     pend as for act accept; a key already rejected has no act.
//   - salt/key: salt/key.py (Key.accept, reject, delete_key): result True.
//   - salt/minion/<id>/start and minion_start: Minion._fire_master in
//     salt/minion.py, fired as the load by _minion_event in
//     salt/daemons/masterapi.py (tok removed by salt/master.py).
//   - salt/job/<jid>/new: _prep_pub in salt/master.py; /ret/<id>: the
//     minion's return load (_return_pub in salt/minion.py) fired by
//     store_job in salt/utils/job.py. Salt's also has "user" and, for
//     some functions, "out": Halite's returns do not carry them.
//   - salt/run/<jid>/new and /ret: SyncClientMixin.low in
//     salt/client/mixins.py: fun "runner.<fun>", fun_args the args then
//     the kwargs as one plain mapping.
//   - salt/wheel/<jid>/new and /ret: ClearFuncs.wheel in salt/master.py
//     (fun "wheel.<fun>", tag salt/wheel/<jid>) with the fun_args of
//     SyncClientMixin.low.
//
// Every event also has _stamp (SaltEvent.fire_event in salt/utils/event.py).
func TestSaltEventFields(t *testing.T) {
	tm := startMaster(t, nil, nil)
	tm.startAgent(t, "f1", nil)
	auth := func(act string) func(map[string]any) bool {
		return func(d map[string]any) bool {
			a, ok := d["act"]
			return d["id"] == "f1" && (act == "" && !ok || a == act)
		}
	}
	type want struct {
		keys []string
		vals map[string]any // compared with fmt.Sprint
	}
	check := func(t *testing.T, tag string, d map[string]any, w want) {
		t.Helper()
		if got := slices.Sorted(maps.Keys(d)); !slices.Equal(got, w.keys) {
			t.Errorf("%s fields: got %v, want %v", tag, got, w.keys)
		}
		for k, v := range w.vals {
			if got, want := fmt.Sprint(d[k]), fmt.Sprint(v); got != want {
				t.Errorf("%s %s: got %s, want %s", tag, k, got, want)
			}
		}
	}
	authKeys := []string{"_stamp", "act", "id", "pub", "result"}
	keyKeys := []string{"_stamp", "act", "id", "result"}
	startKeys := []string{"_stamp", "cmd", "data", "id", "pretag", "tag"}
	callKeys := []string{"_stamp", "fun", "fun_args", "jid", "user"}
	wheelKeys := append(slices.Clone(callKeys), "tag")
	slices.Sort(wheelKeys)
	withRet := func(keys []string) []string {
		out := append(slices.Clone(keys), "return", "success")
		slices.Sort(out)
		return out
	}

	check(t, "salt/auth pend", tm.events.wait(t, event.TagAuth, auth("pend")),
		want{authKeys, map[string]any{"act": "pend", "result": true}})

	tm.wheel(t, "key.accept", "f1")
	check(t, "salt/key accept", tm.events.wait(t, event.TagKey, idIs("f1", "act", "accept")),
		want{keyKeys, map[string]any{"result": true}})
	wn := tm.events.wait(t, "salt/wheel/*/new", func(d map[string]any) bool { return d["fun"] == "wheel.key.accept" })
	check(t, "salt/wheel/<jid>/new", wn, want{wheelKeys, map[string]any{
		"fun_args": []any{"f1"}, "user": "tester", "tag": "salt/wheel/" + fmt.Sprint(wn["jid"]),
	}})
	check(t, "salt/wheel/<jid>/ret",
		tm.events.wait(t, "salt/wheel/*/ret", func(d map[string]any) bool { return d["jid"] == wn["jid"] }),
		want{withRet(wheelKeys), map[string]any{
			"fun": "wheel.key.accept", "success": true, "return": map[string]any{"minions": []any{"f1"}},
		}})

	check(t, "salt/auth accept", tm.events.wait(t, event.TagAuth, auth("accept")),
		want{authKeys, map[string]any{"result": true}})
	check(t, "salt/minion/f1/start", tm.events.wait(t, event.TagMinionStart("f1"), idIs("f1")),
		want{startKeys, map[string]any{"cmd": "_minion_event", "pretag": nil, "tag": "salt/minion/f1/start"}})
	check(t, "minion_start", tm.events.wait(t, event.TagMinionStartOld, idIs("f1")),
		want{startKeys, map[string]any{"cmd": "_minion_event", "pretag": nil, "tag": "minion_start"}})
	tm.waitConnected(t, "f1")

	job, _, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "f1", Fun: "test.arg", Arg: []any{"a"}, Kwarg: map[string]any{"k": "v"}, User: "tester"}))
	check(t, "salt/job/<jid>/new", tm.events.wait(t, event.TagJobNew(job.JID), nil),
		want{[]string{"_stamp", "arg", "fun", "jid", "minions", "missing", "tgt", "tgt_type", "user"}, map[string]any{
			"arg": []any{"a", map[string]any{"__kwarg__": true, "k": "v"}}, "fun": "test.arg",
			"minions": []string{"f1"}, "missing": []string{}, "tgt": "f1", "tgt_type": "glob", "user": "tester",
		}})
	check(t, "salt/job/<jid>/ret/f1", tm.events.wait(t, event.TagJobRet(job.JID, "f1"), nil),
		want{[]string{"_stamp", "cmd", "fun", "fun_args", "id", "jid", "retcode", "return", "success"}, map[string]any{
			"cmd": "_return", "fun": "test.arg", "retcode": 0, "success": true,
		}})

	if _, err := tm.call(t, api.OpRunner, "event.send", []any{"halite/fields"}, map[string]any{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	rn := tm.events.wait(t, "salt/run/*/new", func(d map[string]any) bool { return d["fun"] == "runner.event.send" })
	check(t, "salt/run/<jid>/new", rn, want{callKeys, map[string]any{
		"fun_args": []any{"halite/fields", map[string]any{"k": "v"}}, "user": "tester",
	}})
	check(t, "salt/run/<jid>/ret",
		tm.events.wait(t, "salt/run/*/ret", func(d map[string]any) bool { return d["jid"] == rn["jid"] }),
		want{withRet(callKeys), map[string]any{"fun": "runner.event.send", "success": true, "return": true}})

	if _, err := tm.call(t, api.OpWheel, "key.reject", []any{"f1"}, map[string]any{"include_accepted": true}); err != nil {
		t.Fatal(err)
	}
	check(t, "salt/key reject", tm.events.wait(t, event.TagKey, idIs("f1", "act", "reject")),
		want{keyKeys, map[string]any{"result": true}})
	// The agent comes back with its rejected key.
	check(t, "salt/auth of a rejected key", tm.events.wait(t, event.TagAuth, auth("")),
		want{[]string{"_stamp", "id", "pub", "result"}, map[string]any{"result": false}})
	tm.wheel(t, "key.delete", "f1")
	check(t, "salt/key delete", tm.events.wait(t, event.TagKey, idIs("f1", "act", "delete")),
		want{keyKeys, map[string]any{"result": true}})
}
