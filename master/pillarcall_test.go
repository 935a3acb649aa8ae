package master

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// testPillars is a pillarFor that gives each device its own secret.
func testPillars(_ context.Context, id string) (map[string]any, error) {
	return map[string]any{"secret": "S3CRET-of-" + id, "role": map[string]any{"name": "cam", "ports": []any{int64(80)}}}, nil
}

func identityOf(t *testing.T, ta *testAgent) *protocol.Identity {
	t.Helper()
	id, _, err := protocol.LoadOrCreateIdentity(ta.pki, "minion")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPillarGetOwnOnly: each agent gets its own pillar at session start
// (PillarGet, sealed to its key) and pillar.get reads it; the box the
// master makes for device A does not open as B's, and B's PillarGet, which
// names no device, can only ever be answered with B's (the master takes
// the id from the session).
func TestPillarGetOwnOnly(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, func(m *Master) { m.pillarFor = testPillars })
	a := tm.startAgent(t, "cam-a", nil)
	b := tm.startAgent(t, "cam-b", nil)
	tm.waitConnected(t, "cam-a", "cam-b")
	for _, ta := range []*testAgent{a, b} {
		waitFor(t, ta.id+" pillar", func() bool { return ta.Pillar()["secret"] == "S3CRET-of-"+ta.id })
	}
	if s := fmt.Sprint(b.Pillar()); strings.Contains(s, "cam-a") {
		t.Fatalf("cam-b holds cam-a's pillar: %s", s)
	}
	// What the master seals for a session opens only with that device's
	// key, that id and that nonce.
	nonce := bytes.Repeat([]byte{9}, protocol.MinPillarNonce)
	sa := tm.minions.session("cam-a")
	box, err := tm.sealedPillar(context.Background(), sa, nonce, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(box, []byte("S3CRET")) {
		t.Fatal("the sealed pillar holds the secret in the clear")
	}
	ida, idb := identityOf(t, a), identityOf(t, b)
	if _, err := ida.Open("cam-a", protocol.PurposePillar, nonce, box); err != nil {
		t.Fatalf("cam-a cannot open its own pillar: %v", err)
	}
	for _, try := range []struct {
		name string
		open func() error
	}{
		{"cam-b's key", func() error { _, err := idb.Open("cam-b", protocol.PurposePillar, nonce, box); return err }},
		{"cam-b's key, cam-a's id", func() error { _, err := idb.Open("cam-a", protocol.PurposePillar, nonce, box); return err }},
		{"another nonce", func() error {
			_, err := ida.Open("cam-a", protocol.PurposePillar, bytes.Repeat([]byte{8}, 16), box)
			return err
		}},
	} {
		if err := try.open(); protocol.KindOf(err) != protocol.KindBadSig {
			t.Errorf("opening cam-a's pillar with %s: %v, want KindBadSig", try.name, err)
		}
	}
	// cam-b asks (a PillarGet on its session): the answer is sealed to
	// cam-b and holds cam-b's pillar; there is no field to name cam-a.
	sb := tm.minions.session("cam-b")
	boxB, err := tm.sealedPillar(context.Background(), sb, nonce, false)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := idb.Open("cam-b", protocol.PurposePillar, nonce, boxB)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte("S3CRET-of-cam-a")) || !bytes.Contains(plain, []byte("S3CRET-of-cam-b")) {
		t.Errorf("cam-b's answer: %q", plain)
	}
	// pillar.get through the agent's executor: colon keys, default.
	res := tm.publish(t, &api.Request{Tgt: "cam-a", Fun: "pillar.get", Arg: []any{"role:name"}})
	_, rets, _ := returnsOf(t, res)
	if got := rets["cam-a"]["return"]; got != "cam" {
		t.Errorf("pillar.get role:name on cam-a = %v, want cam", got)
	}
}

// TestSealedStateJobs: a state job compiled with pillar goes to an agent
// of capability 13 sealed (no secret on the wire, each device its own key
// box, the signature over the sealed bytes), and to an older agent not at
// all: it gets a compile error saying why.
func TestSealedStateJobs(t *testing.T) {
	roots := t.TempDir()
	sls := "secret_file:\n  file.managed:\n    - name: /tmp/x\n    - contents: {{ pillar['secret'] }}\n"
	if err := os.WriteFile(filepath.Join(roots, "sec.sls"), []byte(sls), 0o644); err != nil {
		t.Fatal(err)
	}
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.FileRoots = map[string][]string{"base": {roots}}
	}, func(m *Master) { m.pillarFor = testPillars })
	a := tm.startAgent(t, "cam-a", nil)
	b := tm.startAgent(t, "cam-b", nil)
	tm.startAgent(t, "old-c", nil)
	tm.waitConnected(t, "cam-a", "cam-b", "old-c")
	tm.minions.session("old-c").caps = protocol.CapSealedState - 1 // plays an older agent
	req := &api.Request{Fun: "state.sls", Arg: []any{"sec"}, Kwarg: map[string]any{"pillar": map[string]any{"extra": "CLI-MARKER"}}}
	jb := &protocol.JobBody{JID: tm.jids.Next(), Tgt: "*", TgtType: "glob", Fun: req.Fun, Kwarg: req.Kwarg}
	sj, err := tm.compileStates(req, jb, []string{"cam-a", "cam-b", "old-c"})
	if err != nil {
		t.Fatal(err)
	}
	idents := map[string]*protocol.Identity{"cam-a": identityOf(t, a), "cam-b": identityOf(t, b)}
	seen := map[string]bool{}
	for _, g := range sj.groups {
		if bytes.Contains(g.wire, []byte("S3CRET")) || bytes.Contains(g.wire, []byte("CLI-MARKER")) {
			t.Errorf("the job for %v holds pillar in the clear", g.ids)
		}
		msg, err := protocol.Decode(g.wire[4:])
		if err != nil {
			t.Fatal(err)
		}
		body, err := msg.(*protocol.Job).Open(tm.id.Pub)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range g.ids {
			seen[id] = true
			if id == "old-c" {
				if body.Kwarg[protocol.KwargSealed] != nil || !strings.Contains(fmt.Sprint(body.Kwarg["__state__"]), "too old to open sealed state jobs") {
					t.Errorf("old-c got %v, want the refusal", body.Kwarg)
				}
				continue
			}
			if _, ok := body.Kwarg["__state__"]; ok {
				t.Errorf("%s: __state__ in the clear", id)
			}
			sealed, _ := body.Kwarg[protocol.KwargSealed].([]byte)
			keys, _ := body.Kwarg[protocol.KwargKeys].(map[string]any)
			if len(keys) != 1 {
				t.Errorf("%s: %d key boxes, want its own only", id, len(keys))
			}
			plain, err := idents[id].OpenKwargs(id, body.JID, sealed, keys)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if s := fmt.Sprint(plain["__state__"]); !strings.Contains(s, "S3CRET-of-"+id) {
				t.Errorf("%s opened %s, want its own secret", id, s)
			}
			// The other device cannot open it.
			other := "cam-a"
			if id == "cam-a" {
				other = "cam-b"
			}
			if _, err := idents[other].OpenKwargs(other, body.JID, sealed, keys); err == nil {
				t.Errorf("%s opened %s's sealed state", other, id)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("jobs for %v, want all three", seen)
	}
}
