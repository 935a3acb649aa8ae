package master

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/config"
)

// TestReactorMinionStartAndWheel: a start event drives a local job as user
// Reactor, a custom event drives wheel key.gen_accept, and the reactor
// runners list, add and delete rules.
func TestReactorMinionStartAndWheel(t *testing.T) {
	dir := t.TempDir()
	start := filepath.Join(dir, "start.sls")
	os.WriteFile(start, []byte("ping_new:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n"), 0o644)
	keys := filepath.Join(dir, "keys.sls")
	os.WriteFile(keys, []byte("{% if data['make'].startswith('cam') %}\nmake_key:\n  wheel.key.gen_accept:\n    - args:\n      - id_: {{ data['make'] }}\n{% endif %}\n"), 0o644)
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.Reactor = []any{
			map[string]any{"salt/minion/*/start": []any{start}},
			map[string]any{"my/keys": []any{keys}},
		}
	}, nil)
	tm.startAgent(t, "cam1", nil)
	job := tm.events.wait(t, "salt/job/*/new", func(d map[string]any) bool { return d["user"] == ReactorUser && d["fun"] == "test.ping" })
	jid := job["jid"].(string)
	ret := tm.events.wait(t, "salt/job/"+jid+"/ret/cam1", nil)
	if ret["return"] != true {
		t.Errorf("got return %v, want true", ret["return"])
	}

	tm.run(t, "event.send", "my/keys", map[string]any{"make": "cam9"})
	tm.events.wait(t, "salt/wheel/*/ret", func(d map[string]any) bool { return d["fun"] == "wheel.key.gen_accept" && d["user"] == ReactorUser })
	if _, ok := tm.keys.AcceptedKey("cam9"); !ok {
		t.Error("got no accepted key for cam9, want key.gen_accept to have made one")
	}

	list := tm.run(t, "reactor.list")
	if l, ok := list.([]any); !ok || len(l) != 2 {
		t.Fatalf("reactor.list: got %v, want two rules", list)
	}
	tm.run(t, "reactor.add", "new/tag", start)
	tm.run(t, "reactor.delete", "my/keys")
	got := tm.run(t, "reactor.list").([]any)
	if len(got) != 2 || got[1].(map[string]any)["new/tag"] == nil {
		t.Errorf("after add and delete: got %v, want start and new/tag", got)
	}
}
