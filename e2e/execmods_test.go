package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEverydayFunctions calls the execution functions a Salt user types
// every day through halite, against real master and agent processes:
// file.write/read/touch/file_exists/stats, config.get, status.*,
// network.ip_addrs, and grains.setval/append/delval, which must survive an
// agent restart (Salt writes /etc/salt/grains; salt/modules/grains.py
// setval → setvals → _write_grains).
func TestEverydayFunctions(t *testing.T) {
	c := newCluster(t, "auto_accept: True\n")
	c.startMaster()
	agent := c.startAgent("cam1", "grains:\n  site: north\n")
	c.waitUp("cam1")

	dir := t.TempDir()
	f := filepath.Join(dir, "motd")
	if rets, r := c.jsonOut("halite", "cam1", "file.write", f, "hello", "world"); r.code != 0 || !strings.Contains(asString(rets["cam1"]), "Wrote 2 lines") {
		t.Fatalf("file.write: exit %d, got %v (salt/modules/file.py write: 'Wrote N lines to \"path\"')\n%s", r.code, rets, r.stderr)
	}
	if rets, _ := c.jsonOut("halite", "cam1", "file.read", f); rets["cam1"] != "hello\nworld\n" {
		t.Errorf("file.read: got %q, want %q", rets["cam1"], "hello\nworld\n")
	}
	if rets, _ := c.jsonOut("halite", "cam1", "file.file_exists", f); rets["cam1"] != true {
		t.Errorf("file.file_exists: got %v, want true", rets["cam1"])
	}
	touched := filepath.Join(dir, "new")
	if rets, _ := c.jsonOut("halite", "cam1", "file.touch", touched); rets["cam1"] != true {
		t.Errorf("file.touch: got %v, want true", rets["cam1"])
	}
	if _, err := os.Stat(touched); err != nil {
		t.Errorf("file.touch made nothing: %v", err)
	}
	rets, _ := c.jsonOut("halite", "cam1", "file.stats", f)
	st, _ := rets["cam1"].(map[string]any)
	if st["size"] != float64(12) || st["type"] != "file" {
		t.Errorf("file.stats: got %v, want size 12 and type file", st)
	}

	if rets, _ := c.jsonOut("halite", "cam1", "config.get", "site"); rets["cam1"] != "north" {
		t.Errorf("config.get site: got %v, want the grain north (salt/modules/config.py: opts, then grains)", rets["cam1"])
	}
	if rets, _ := c.jsonOut("halite", "cam1", "config.get", "no:such", "default=fallback"); rets["cam1"] != "fallback" {
		t.Errorf("config.get with default: got %v, want fallback", rets["cam1"])
	}
	rets, _ = c.jsonOut("halite", "cam1", "status.loadavg")
	if la, _ := rets["cam1"].(map[string]any); la["1-min"] == nil {
		t.Errorf("status.loadavg: got %v, want 1-min, 5-min, 15-min (salt/modules/status.py)", rets["cam1"])
	}
	rets, _ = c.jsonOut("halite", "cam1", "network.ip_addrs")
	if addrs, _ := rets["cam1"].([]any); len(addrs) == 0 && !strings.Contains(asString(rets["cam1"]), "[]") {
		t.Errorf("network.ip_addrs: got %v, want a list", rets["cam1"])
	}

	// Grains set at run time are on disk, in the running agent and on
	// the master (targeting), and still there after a restart.
	if rets, r := c.jsonOut("halite", "cam1", "grains.setval", "role", "door"); r.code != 0 {
		t.Fatalf("grains.setval: exit %d, got %v\n%s", r.code, rets, r.stderr)
	}
	c.jsonOut("halite", "cam1", "grains.append", "zones", "lobby")
	c.jsonOut("halite", "cam1", "grains.setval", "tmp", "x")
	c.jsonOut("halite", "cam1", "grains.delval", "tmp", "destructive=True")
	waitFor(t, 10*time.Second, "the master to target the new grain", func() bool {
		rets, _ := c.jsonOut("halite", "-G", "role:door", "test.ping")
		return rets["cam1"] == true
	})
	c.stop(agent)
	c.startAgent("cam1", "grains:\n  site: north\n")
	c.waitUp("cam1")
	rets, _ = c.jsonOut("halite", "cam1", "grains.item", "role", "zones", "tmp", "site")
	g, _ := rets["cam1"].(map[string]any)
	if g["role"] != "door" || asString(g["zones"]) != "[lobby]" || g["site"] != "north" {
		t.Errorf("grains after a restart: got %v, want role door, zones [lobby], site north", g)
	}
	if v, ok := g["tmp"]; ok && v != "" && v != nil {
		t.Errorf("grains.delval destructive: tmp still %v after a restart", v)
	}
}

func asString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = asString(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
