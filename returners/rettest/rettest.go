// Package rettest holds the checks every returner backend's tests run
// against a real server: the returner round trip and its idempotency on
// (jid, id), the job cache functions, and event_return. It sits beside
// the backends and is imported only by their tests.
package rettest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/halite-fleet/halite/returners"
)

// Unique returns a short random name part, so that runs never share a
// database, key prefix or subject.
func Unique() string {
	b := make([]byte, 5)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// JID returns a jid of now plus offset microseconds.
func JID(offset int) string {
	t := time.Now().Add(time.Duration(offset) * time.Microsecond)
	return t.Format("20060102150405") + fmt.Sprintf("%06d", t.Nanosecond()/1000)
}

// Ret is a return dict as the master gives returners.
func Ret(jid, id, fun string, ret any) map[string]any {
	return map[string]any{"id": id, "jid": jid, "fun": fun, "fun_args": []any{"a", int64(1)},
		"return": ret, "retcode": int64(0), "success": true, "_stamp": "2026-01-02T03:04:05.000006"}
}

// Ctx is a test's context with a deadline.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// JobCache runs the job cache functions against r: save_load/get_load,
// returner twice per (jid, id) then get_jid, get_fun, get_jids,
// get_minions. countRows, when not nil, counts the rows the backend holds
// for (jid, id), to show a retried insert adds none.
func JobCache(t *testing.T, r returners.JobCache, countRows func(jid, id string) int) {
	t.Helper()
	ctx := Ctx(t)
	jid1, jid2 := JID(0), JID(1000)
	if got, err := r.PrepJID(ctx, false, jid1); err != nil || got != jid1 {
		t.Fatalf("prep_jid(passed) = %q, %v; want %q", got, err, jid1)
	}
	if got, _ := r.PrepJID(ctx, false, ""); len(got) != 20 {
		t.Fatalf("prep_jid() = %q, want a 20-digit jid", got)
	}
	load := map[string]any{"jid": jid1, "fun": "test.ping", "arg": []any{}, "tgt": "web*", "tgt_type": "glob",
		"user": "root", "minions": []any{"web1", "web2"}}
	for _, l := range []struct {
		jid  string
		load map[string]any
	}{{jid1, load}, {jid2, map[string]any{"jid": jid2, "fun": "cmd.run", "arg": []any{"uptime"}, "tgt": "*", "tgt_type": "glob", "user": "ops"}}} {
		if err := r.SaveLoad(ctx, l.jid, l.load, nil); err != nil {
			t.Fatalf("save_load %s: %v", l.jid, err)
		}
	}
	// A retried save_load is no error.
	if err := r.SaveLoad(ctx, jid1, load, nil); err != nil {
		t.Fatalf("save_load again: %v", err)
	}
	if err := r.SaveMinions(ctx, jid1, []string{"web1", "web2"}); err != nil {
		t.Fatalf("save_minions: %v", err)
	}
	got, err := r.GetLoad(ctx, jid1)
	if err != nil {
		t.Fatalf("get_load: %v", err)
	}
	if got["fun"] != "test.ping" || got["tgt"] != "web*" || got["jid"] != jid1 {
		t.Fatalf("get_load = %v, want fun test.ping, tgt web*, jid %s", got, jid1)
	}
	if got, err := r.GetLoad(ctx, "19990101000000000000"); err != nil || len(got) != 0 {
		t.Fatalf("get_load(unknown) = %v, %v; want an empty dict", got, err)
	}
	rets := []map[string]any{
		Ret(jid1, "web1", "test.ping", true),
		Ret(jid1, "web2", "test.ping", map[string]any{"nested": []any{"x", int64(2)}, "ü": "✓"}),
		Ret(jid2, "web1", "cmd.run", " 10:00 up 3 days"),
	}
	for _, ret := range rets {
		for range 2 { // at least once: the second is a retry
			if err := r.Returner(ctx, ret); err != nil {
				t.Fatalf("returner %s/%s: %v", ret["jid"], ret["id"], err)
			}
		}
	}
	if countRows != nil {
		if n := countRows(jid1, "web1"); n != 1 {
			t.Fatalf("rows for (%s, web1) after a retried insert: got %d, want 1", jid1, n)
		}
	}
	byID, err := r.GetJID(ctx, jid1)
	if err != nil {
		t.Fatalf("get_jid: %v", err)
	}
	if len(byID) != 2 || byID["web1"]["return"] != true {
		t.Fatalf("get_jid = %v, want web1 and web2 with web1 returning true", byID)
	}
	want := map[string]any{"nested": []any{"x", int64(2)}, "ü": "✓"}
	if !reflect.DeepEqual(byID["web2"]["return"], want) {
		t.Fatalf("get_jid web2 return = %#v, want %#v", byID["web2"]["return"], want)
	}
	fun, err := r.GetFun(ctx, "cmd.run")
	if err != nil {
		t.Fatalf("get_fun: %v", err)
	}
	if _, ok := fun["web1"]; !ok || len(fun) != 1 {
		t.Fatalf("get_fun(cmd.run) = %v, want web1 only", fun)
	}
	jids, err := r.GetJIDs(ctx)
	if err != nil {
		t.Fatalf("get_jids: %v", err)
	}
	if j, ok := jids[jid2]; !ok || j["Function"] != "cmd.run" || j["User"] != "ops" || j["StartTime"] != returners.JIDToTime(jid2) {
		t.Fatalf("get_jids[%s] = %v, want Function cmd.run, User ops, StartTime %s", jid2, jids[jid2], returners.JIDToTime(jid2))
	}
	if _, ok := jids[jid1]; !ok {
		t.Fatalf("get_jids lacks %s: %v", jid1, jids)
	}
	minions, err := r.GetMinions(ctx)
	if err != nil {
		t.Fatalf("get_minions: %v", err)
	}
	sort.Strings(minions)
	if !reflect.DeepEqual(minions, []string{"web1", "web2"}) {
		t.Fatalf("get_minions = %v, want [web1 web2]", minions)
	}
}

// Events sends n events in batches of batch through r and returns them.
func Events(t *testing.T, r returners.EventReturner, n, batch int) []returners.Event {
	t.Helper()
	ctx := Ctx(t)
	var all []returners.Event
	for i := 0; i < n; i += batch {
		var b []returners.Event
		for j := i; j < min(n, i+batch); j++ {
			b = append(b, returners.Event{Tag: fmt.Sprintf("halite/test/%d", j), Data: map[string]any{"n": int64(j), "_stamp": "x"}})
		}
		if err := r.EventReturn(ctx, b); err != nil {
			t.Fatalf("event_return: %v", err)
		}
		all = append(all, b...)
	}
	return all
}
