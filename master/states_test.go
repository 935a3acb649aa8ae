package master

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// TestStateVariantsFor: a state job compiled per device goes out as one
// signed job per variant (devices whose compiled states are equal), each
// naming in its signed Kwarg "__for__" exactly the devices it is for, at
// most 256 of them per job, so that a relay cannot hand device B what was
// compiled for device A (STATES.md, "Flow" 1). One device's compile error
// is its own: the others get their states.
func TestStateVariantsFor(t *testing.T) {
	roots := t.TempDir()
	for name, text := range map[string]string{
		"top.sls":    "base:\n  '*':\n    - common\n  'bad*':\n    - broken\n",
		"common.sls": "motd:\n  test.nop:\n    - name: role {{ grains['role'] }}\n",
		"broken.sls": "a:\n  test.nop:\n    - x: {{ grains['role'] }\n",
	} {
		if err := os.WriteFile(filepath.Join(roots, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tm := startMaster(t, func(c *config.Master) { c.FileRoots = map[string][]string{"base": {roots}} }, nil)

	role := map[string]string{}
	var ids []string
	add := func(id, r string) {
		ids = append(ids, id)
		role[id] = r
		tm.minions.setGrains(id, map[string]any{"id": id, "role": r})
	}
	for i := 0; i < 300; i++ {
		add(fmt.Sprintf("cam%03d", i), "camera")
	}
	for i := 0; i < 200; i++ {
		add(fmt.Sprintf("gw%03d", i), "gateway")
	}
	add("bad1", "camera")

	jb := &protocol.JobBody{JID: tm.jids.Next(), Tgt: "*", TgtType: "glob", Fun: "state.apply"}
	sj, err := tm.compileStates(&api.Request{Fun: "state.apply", Tgt: "*"}, jb, ids)
	if err != nil {
		t.Fatal(err)
	}
	if sj.stats.Variants != 3 {
		t.Errorf("got %d variants, want 3 (camera, gateway, the broken one)", sj.stats.Variants)
	}
	seen := map[string]int{}
	for _, g := range sj.groups {
		// What a device reads off the wire, verified with the master's key.
		msg, err := protocol.Decode(g.wire[4:])
		if err != nil {
			t.Fatal(err)
		}
		body, err := msg.(*protocol.Job).Open(tm.id.Pub)
		if err != nil {
			t.Fatalf("job does not verify: %v", err)
		}
		var forIDs []string
		l, ok := body.Kwarg["__for__"].([]any)
		if !ok {
			t.Fatalf("signed Kwarg has no __for__ list: %v", body.Kwarg["__for__"])
		}
		for _, x := range l {
			forIDs = append(forIDs, x.(string))
		}
		if d := strings.Join(forIDs, ","); d != strings.Join(g.ids, ",") {
			t.Errorf("__for__ %v, want the group's ids %v", forIDs, g.ids)
		}
		if len(forIDs) > maxForIDs {
			t.Errorf("__for__ names %d devices, more than %d", len(forIDs), maxForIDs)
		}
		st := body.Kwarg["__state__"].(map[string]any)
		low := fmt.Sprint(st["low"])
		for _, id := range forIDs {
			seen[id]++
			switch {
			case id == "bad1":
				if errs := fmt.Sprint(st["errors"]); !strings.Contains(errs, "broken.sls line 3") {
					t.Errorf("bad1: errors %s, want broken.sls line 3", errs)
				}
			case st["errors"] != nil:
				t.Errorf("%s: errors %v", id, st["errors"])
			case !strings.Contains(low, "role "+role[id]):
				t.Errorf("%s (%s) got the state of another variant: %s", id, role[id], low)
			}
		}
		// The ids are signed: a relay that changes them breaks the
		// signature.
		tampered := *msg.(*protocol.Job)
		payload := append([]byte(nil), tampered.Signed.Body...)
		if i := strings.Index(string(payload), forIDs[0]); i >= 0 {
			payload[i] ^= 1
			tampered.Signed.Body = payload
			if _, err := tampered.Open(tm.id.Pub); err == nil {
				t.Errorf("a job whose __for__ was changed still verifies")
			}
		}
	}
	var missing []string
	for _, id := range ids {
		if seen[id] != 1 {
			missing = append(missing, fmt.Sprintf("%s:%d", id, seen[id]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("devices not named exactly once by the jobs' __for__: %v", missing)
	}
	// camera: 300 devices in two jobs (256 + 44); gateway: one; bad1: one.
	if len(sj.groups) != 4 {
		var sizes []int
		for _, g := range sj.groups {
			sizes = append(sizes, len(g.ids))
		}
		t.Errorf("got %d jobs of %v devices, want 4 (256+44, 200, 1)", len(sj.groups), sizes)
	}

	// One variant: no __for__ (every targeted device may run it).
	sj, err = tm.compileStates(&api.Request{Fun: "state.apply", Tgt: "cam*"}, jb, ids[:300])
	if err != nil {
		t.Fatal(err)
	}
	if len(sj.groups) != 1 || sj.groups[0].job == nil {
		t.Fatalf("one variant: got %d jobs", len(sj.groups))
	}
	msg, _ := protocol.Decode(sj.groups[0].wire[4:])
	body, err := msg.(*protocol.Job).Open(tm.id.Pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := body.Kwarg["__for__"]; ok {
		t.Errorf("one variant: __for__ set")
	}
}

// TestStatesE2EMasterSide is the master's half of e2e's
// TestStatesCompiledOnMaster (the same files and grains): what the master
// signs for each device, before any agent runs it (salt/state.py
// HighState.top_matches, render_state).
func TestStatesE2EMasterSide(t *testing.T) {
	roots := t.TempDir()
	for name, text := range map[string]string{
		"top.sls": "base:\n  '*':\n    - core\n  'site:north':\n    - match: grain\n    - north\n",
		"core.sls": `hello:
  test.succeed_without_changes:
    - name: hello from {{ grains['site'] }}
{% if grains['site'] == 'north' %}
north_only:
  cmd.run:
    - name: echo {{ salt['grains.get']('site') }}
{% endif %}
`,
		"north.sls":  "north_nop:\n  test.nop: []\n",
		"broken.sls": "a:\n  test.nop:\n    - x: {{ grains['site'] }\n",
		"runs.sls":   "a:\n  test.nop:\n    - x: {{ salt['cmd.run']('id') }}\n",
	} {
		if err := os.WriteFile(filepath.Join(roots, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tm := startMaster(t, func(c *config.Master) { c.FileRoots = map[string][]string{"base": {roots}} }, nil)
	tm.minions.setGrains("cam1", map[string]any{"id": "cam1", "site": "north"})
	tm.minions.setGrains("cam2", map[string]any{"id": "cam2", "site": "south"})
	states := func(req *api.Request, ids ...string) map[string]map[string]any {
		t.Helper()
		jb := &protocol.JobBody{JID: tm.jids.Next(), Tgt: "*", TgtType: "glob", Fun: req.Fun}
		sj, err := tm.compileStates(req, jb, ids)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]any{}
		for _, g := range sj.groups {
			msg, err := protocol.Decode(g.wire[4:])
			if err != nil {
				t.Fatal(err)
			}
			body, err := msg.(*protocol.Job).Open(tm.id.Pub)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range g.ids {
				out[id] = body.Kwarg["__state__"].(map[string]any)
			}
		}
		return out
	}
	ids := func(st map[string]any) string {
		var got []string
		l, _ := st["low"].([]any)
		for _, x := range l {
			got = append(got, fmt.Sprint(x.(map[string]any)["__id__"]))
		}
		return strings.Join(got, ",")
	}
	got := states(&api.Request{Fun: "state.show_lowstate"}, "cam1", "cam2")
	if s := ids(got["cam1"]); s != "hello,north_only,north_nop" {
		t.Errorf("cam1 lowstate ids: got %s, want hello,north_only,north_nop (errors %v)", s, got["cam1"]["errors"])
	}
	if s := ids(got["cam2"]); s != "hello" {
		t.Errorf("cam2 lowstate ids: got %s, want hello", s)
	}
	got = states(&api.Request{Fun: "state.apply"}, "cam1", "cam2")
	for id, site := range map[string]string{"cam1": "north", "cam2": "south"} {
		if low := fmt.Sprint(got[id]["low"]); !strings.Contains(low, "hello from "+site) {
			t.Errorf("%s state.apply low: %s, want hello from %s", id, low, site)
		}
	}
	got = states(&api.Request{Fun: "state.sls", Arg: []any{"broken"}}, "cam1")
	if errs := fmt.Sprint(got["cam1"]["errors"]); !strings.Contains(errs, "broken.sls line 3") {
		t.Errorf("state.sls broken: errors %s, want broken.sls line 3", errs)
	}
	got = states(&api.Request{Fun: "state.sls", Arg: []any{"runs"}}, "cam1")
	if errs := fmt.Sprint(got["cam1"]["errors"]); !strings.Contains(errs, "runs.sls line 3") || !strings.Contains(errs, "salt['cmd.run'] cannot run at render time on the master") {
		t.Errorf("state.sls runs: errors %s, want the refusal with runs.sls line 3", errs)
	}
}
