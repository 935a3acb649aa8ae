package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestKeyActionsAndOutputs: halite-key's reject and delete as a user runs
// them, and halite's -v and --static outputs with a minion that does not
// return.
func TestKeyActionsAndOutputs(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	for _, id := range []string{"k1", "k2", "k3"} {
		c.startAgent(id, "")
	}
	c.acceptAll("k1", "k2", "k3")

	// --static prints one document at the end; -v names the jid and says
	// who did not return.
	c.stop(c.agents["k3"])
	waitFor(t, 10*time.Second, "k3 down", func() bool {
		r := c.cli("halite-run", "manage.down", "--out", "json")
		return strings.Contains(r.stdout, "k3")
	})
	r := c.cli("halite", "-t", "2", "--static", "--out", "json", "*", "test.ping")
	var all map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil {
		t.Fatalf("--static --out json is not one JSON document: %v\n%s", err, r.stdout)
	}
	if all["k1"] != true || all["k2"] != true || !strings.Contains(all["k3"].(string), "Not connected") || r.code == 0 {
		t.Errorf("--static: exit %d, %v", r.code, all)
	}
	r = c.cli("halite", "-v", "-t", "2", "*", "test.ping")
	if !strings.Contains(r.stdout, "Executing job with jid ") || !strings.Contains(r.stderr, "1 of 3 minions did not return") {
		t.Errorf("-v: stdout %q stderr %q", r.stdout, r.stderr)
	}

	// Reject an accepted key (its agent is dropped and gets no more jobs),
	// then delete it.
	if r := c.cli("halite-key", "-r", "k2", "--include-accepted", "-y"); r.code != 0 || !strings.Contains(r.stdout, "Key for minion k2 rejected.") {
		t.Fatalf("halite-key -r k2: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	keys, _ := c.jsonOut("halite-key", "-L")
	if rej, _ := keys["minions_rejected"].([]any); len(rej) != 1 || rej[0] != "k2" {
		t.Errorf("after -r: %v", keys)
	}
	rets, _ := c.jsonOut("halite", "-t", "2", "*", "test.ping")
	if _, ok := rets["k2"]; ok {
		t.Errorf("a rejected minion still answered: %v", rets)
	}
	if r := c.cli("halite-key", "-d", "k2", "-y"); r.code != 0 || !strings.Contains(r.stdout, "Key for minion k2 deleted.") {
		t.Fatalf("halite-key -d k2: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	// The deleted agent comes back as pending, as with Salt.
	waitFor(t, 20*time.Second, "k2 pending again", func() bool {
		keys, _ := c.jsonOut("halite-key", "-L")
		pre, _ := keys["minions_pre"].([]any)
		return len(pre) == 1 && pre[0] == "k2"
	})
	// Without -y and with no answer on standard input nothing changes.
	if r := c.cli("halite-key", "-D"); r.code == 0 {
		t.Errorf("halite-key -D with no answer: exit 0, want a refusal")
	}
	keys, _ = c.jsonOut("halite-key", "-L")
	if acc, _ := keys["minions"].([]any); len(acc) != 2 {
		t.Errorf("keys changed without confirmation: %v", keys)
	}
}
