package master

import (
	"fmt"
	"testing"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
)

// TestDiscoveryList: a relay's discovery events make its inventory, which
// discovery.list shows, filtered; a device naming another relay and an
// agent relay_allow does not name are not heard; the inventory is saved
// and read back by the next master.
func TestDiscoveryList(t *testing.T) {
	dir := t.TempDir()
	setup := func(c *config.Master) {
		c.AutoAccept = true
		c.RelayAllow = []string{"r1"}
		c.CacheDir = dir
	}
	tm := startMaster(t, setup, nil)
	r1 := tm.startAgent(t, "r1", nil)
	d1 := tm.startAgent(t, "d1", nil)
	tm.waitConnected(t, "r1", "d1")
	send := func(a *testAgent, tag string, data map[string]any) {
		t.Helper()
		if err := a.SendEvent(tag, data); err != nil {
			t.Fatalf("%s sends %s: %v", a.id, tag, err)
		}
		tm.events.wait(t, tag, func(d map[string]any) bool {
			inner, _ := d["data"].(map[string]any)
			return d["id"] == a.id && inner["key"] == data["key"] && fmt.Sprint(inner["n"]) == fmt.Sprint(data["n"])
		})
	}
	cam := func(key, model string, managed bool) map[string]any {
		return map[string]any{"key": key, "mac": key, "ips": []any{"10.0.0.5"}, "vendor": "Hangzhou Hikvision Digital Technology Co.,Ltd.",
			"managed": managed, "onvif": map[string]any{"model": model, "manufacturer": "Hikvision"}}
	}
	send(d1, "halite/relay/r1/discovery/new", cam("de:ad:00:00:00:01", "spoofed", false))
	send(d1, "halite/relay/d1/discovery/new", cam("de:ad:00:00:00:02", "unallowed", false))
	send(r1, "halite/relay/r1/discovery/new", cam("c0:56:e3:00:00:01", "DS-2CD2143G0-I", false))
	send(r1, "halite/relay/r1/discovery/new", cam("c0:56:e3:00:00:02", "DS-2CD2043", true))
	send(r1, "halite/relay/r1/discovery/new", cam("c0:56:e3:00:00:03", "gone soon", false))
	send(r1, "halite/relay/r1/discovery/changed", cam("c0:56:e3:00:00:01", "DS-2CD2143G0-IS", false))
	send(r1, "halite/relay/r1/discovery/gone", map[string]any{"key": "c0:56:e3:00:00:03"})
	keys := func(res any) []string {
		t.Helper()
		m, ok := res.(map[string]any)
		if !ok {
			t.Fatalf("discovery.list returned %T %v", res, res)
		}
		if len(m) > 1 {
			t.Errorf("relays listed: %v, want r1 only", m)
		}
		var out []string
		l, _ := m["r1"].([]any)
		for _, r := range l {
			rec := r.(map[string]any)
			out = append(out, fmt.Sprint(rec["key"])+"="+fmt.Sprint(rec["onvif"].(map[string]any)["model"]))
		}
		return out
	}
	list := func(kw map[string]any) []string {
		t.Helper()
		res, err := tm.call(t, api.OpRunner, "discovery.list", nil, kw)
		if err != nil {
			t.Fatalf("discovery.list %v: %v", kw, err)
		}
		return keys(res)
	}
	if got := fmt.Sprint(list(nil)); got != "[c0:56:e3:00:00:01=DS-2CD2143G0-IS c0:56:e3:00:00:02=DS-2CD2043]" {
		t.Errorf("discovery.list: %s", got)
	}
	if got := fmt.Sprint(list(map[string]any{"unmanaged": true, "relay": "r*"})); got != "[c0:56:e3:00:00:01=DS-2CD2143G0-IS]" {
		t.Errorf("discovery.list unmanaged=True: %s", got)
	}
	if got := fmt.Sprint(list(map[string]any{"model": "DS-2CD20*"})); got != "[c0:56:e3:00:00:02=DS-2CD2043]" {
		t.Errorf("discovery.list model=DS-2CD20*: %s", got)
	}
	if _, err := tm.call(t, api.OpRunner, "discovery.list", nil, map[string]any{"colour": "red"}); err == nil {
		t.Error("discovery.list colour=red: no error")
	}
	// Saved when the master stops, read by the next one.
	if err := tm.stop(); err != nil {
		t.Fatal(err)
	}
	tm2 := startMaster(t, setup, nil)
	res, err := tm2.call(t, api.OpRunner, "discovery.list", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys(res)); got != "[c0:56:e3:00:00:01=DS-2CD2143G0-IS c0:56:e3:00:00:02=DS-2CD2043]" {
		t.Errorf("after a restart: %s", got)
	}
}
