package relay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/master/keys"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// dynMAC is the device the tests' discovery inventory holds, at 127.0.0.1.
const dynMAC = "02:00:00:00:00:07"

// withInventory gives the relay a discovery: section (WS-Discovery on lo
// only: it finds nothing, or cannot start, which the relay logs and
// goes on) and writes the inventory its discovery reads at start with one
// device, dynMAC at 127.0.0.1: the relay's discovery holds it as if it
// had found it.
func withInventory(t *testing.T) (func(*config.Relay), func(*testRelay)) {
	setup := func(r *config.Relay) {
		r.Discovery = config.DefaultDiscovery()
		r.Discovery.ONVIF = &config.DiscoveryMethod{Interfaces: []string{"lo"}}
	}
	opt := func(tr *testRelay) {
		dir := filepath.Join(tr.cfg.CacheDir, "discovery")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		b, err := protocol.Marshal(map[string]any{"v": 1, "entries": []any{map[string]any{
			"key": dynMAC, "mac": dynMAC, "ips": []any{"127.0.0.1"}, "methods": []any{"arp"},
			"first_seen": now, "last_seen": now, "announced": true,
		}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "inventory.cbor"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return setup, opt
}

// runner calls a master runner as halite-run does.
func (tm *testMaster) runner(t *testing.T, fun string, kw map[string]any) (any, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return api.Call(ctx, tm.sock, &api.Request{Op: api.OpRunner, Fun: fun, Kwarg: kw, User: "tester"})
}

// TestProxyAdd: the master's proxy.add runner makes a proxy minion at a
// relay for a device its discovery found; it comes pending, proxied by
// the relay, answers test.ping once accepted, and outlives a relay
// restart; an address the inventory does not hold, a password outside the
// pillar's proxy: key, a url on another host, a taken id and a count past
// proxy_dynamic_max are refused with a clear error; proxy.remove ends it.
func TestProxyAdd(t *testing.T) {
	tm := startMaster(t, false)
	dev := proxytest.NewRESTDevice("u", "p", nil)
	t.Cleanup(dev.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(dev.URL, "http://"), ":")
	setup, opt := withInventory(t)
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { setup(r); r.ProxyDynamicMax = 5 }, nil, opt)
	waitFor(t, "r1's key pending", func() bool {
		l, _ := tm.wheel(t, "key.list", "pre").(map[string]any)
		pre, _ := l[keys.DirPending].([]any)
		return len(pre) == 1
	})
	tm.wheel(t, "key.accept", "r1")
	waitFor(t, "r1's link", func() bool {
		l, err := tm.runner(t, "proxy.list", map[string]any{"relay": "r1"})
		_, ok := l.(map[string]any)["r1"]
		return err == nil && ok
	})

	add := map[string]any{"relay": "r1", "id": "gw-dyn", "proxytype": "http", "mac": dynMAC, "port": port,
		"health_path": "/health", "username": "u", "grains": map[string]any{"site": "depot"}}
	with := func(k string, v any) map[string]any {
		out := map[string]any{}
		for a, b := range add {
			out[a] = b
		}
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
		return out
	}
	withIP := func(ip string) map[string]any {
		out := with("mac", nil)
		out["ip"] = ip
		return out
	}
	for _, tc := range []struct {
		name string
		kw   map[string]any
		want string
	}{
		{"neither mac nor ip", with("mac", nil), "name the device by mac or by ip"},
		{"an IP not in discovery", withIP("10.99.0.1"), "is not in the relay's discovery inventory"},
		{"both mac and ip", with("ip", "127.0.0.1"), "name the device by mac or by ip"},
		{"a MAC not in discovery", with("mac", "02:00:00:00:00:99"), "is not in the relay's discovery inventory"},
		{"a password outside proxy:", with("password_pillar", "relay:secret"), "under the pillar's proxy: key only"},
		{"a url on another host", with("url", "http://10.1.2.3:"+port+"/"), "must name the device's address 127.0.0.1"},
		{"the relay's own id", with("id", "r1"), "relay's own id"},
		{"an unknown proxytype", with("proxytype", "telnet"), "proxytype \"telnet\" is not one of"},
		{"an unknown option", with("key_file", "/etc/shadow"), "unknown option \"key_file\""},
		{"no relay", with("relay", "nowhere"), "relay \"nowhere\" is not connected"},
		{"a url with credentials", with("url", "http://x:y@127.0.0.1:"+port+"/"), "without credentials"},
		{"a url by name", with("url", "http://localhost:"+port+"/"), "must name the device's address"},
		{"a port out of range", with("port", 70000), "port must be 1 to 65535"},
		{"a timeout not a number", with("timeout", "soon"), "timeout must be a whole number"},
		{"grains not a mapping", with("grains", []any{"a"}), "grains must be a mapping"},
		{"grains too large", with("grains", map[string]any{"x": strings.Repeat("g", 20000)}), "grains must encode to at most"},
		{"a username not a string", with("username", 7), "username must be a string"},
		{"a health_path not a path", with("health_path", "http://evil/"), "health_path \"http://evil/\" must begin with /"},
		{"an invalid id", with("id", "a*b"), "id \"a*b\""},
		{"a bad MAC", with("mac", "zz"), "mac \"zz\""},
	} {
		_, err := tm.runner(t, "proxy.add", tc.kw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("proxy.add with %s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if all, _ := tr.proxyStats(); all != 0 {
		t.Fatalf("refused adds left %d proxy minions", all)
	}

	res, err := tm.runner(t, "proxy.add", add)
	if err != nil {
		t.Fatalf("proxy.add: %v", err)
	}
	if m, _ := res.(map[string]any); m["url"] != "http://127.0.0.1:"+port+"/" || m["dynamic"] != true {
		t.Errorf("proxy.add answered %v", res)
	}
	if _, err := tm.runner(t, "proxy.add", add); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("proxy.add of a taken id: %v", err)
	}
	waitFor(t, "gw-dyn pending, proxied by r1", func() bool {
		l, _ := tm.wheel(t, "key.list", "all").(map[string]any)
		p, _ := l[keys.ProxiedKey].(map[string]any)
		pre, _ := l[keys.DirPending].([]any)
		return p["gw-dyn"] == "r1" && len(pre) == 1 && pre[0] == "gw-dyn"
	})
	fi, err := os.Stat(filepath.Join(tr.cfg.CacheDir, "relay-proxies.cbor"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("relay-proxies.cbor: %v %v", fi, err)
	}
	tm.wheel(t, "key.accept", "gw-dyn")
	waitFor(t, "gw-dyn up", func() bool { _, up := tr.proxyStats(); return up == 1 })
	ping := func(tgt string) {
		t.Helper()
		_, rets, missing := tm.publish(t, tgt, "test.ping", 20)
		if rets["gw-dyn"] != true {
			t.Fatalf("test.ping %s: %v (missing %v)", tgt, rets, missing)
		}
	}
	ping("G@site:depot") // its static grain, from proxy.add

	// Kept across a restart of the relay (the ping's return may still
	// wait for its ack: it goes in a session of the previous run first).
	tr.restart(t)
	waitFor(t, "gw-dyn up after the relay's restart", func() bool { _, up := tr.proxyStats(); return up == 1 })
	ping("gw-dyn")

	// Concurrent adds, up to the bound, with lists and jobs beside them
	// (the race detector watches the relay's proxy list).
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = tm.runner(t, "proxy.add", with("id", fmt.Sprintf("gw-%d", i)))
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			tm.runner(t, "proxy.list", nil)
		}
	}()
	tm.publish(t, "*", "test.ping", 5)
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "proxy_dynamic_max") {
				t.Errorf("proxy.add past the bound: %v", err)
			}
		}
	}
	if all, _ := tr.proxyStats(); failed != 2 || all != 5 {
		t.Errorf("6 adds beside 1 with proxy_dynamic_max 5: %d refused, %d proxy minions", failed, all)
	}
	for i := range 6 {
		tm.runner(t, "proxy.remove", map[string]any{"relay": "r1", "id": fmt.Sprintf("gw-%d", i)})
	}

	if _, err := tm.runner(t, "proxy.remove", map[string]any{"relay": "r1", "id": "gw-dyn"}); err != nil {
		t.Fatalf("proxy.remove: %v", err)
	}
	if _, err := tm.runner(t, "proxy.remove", map[string]any{"relay": "r1", "id": "gw-dyn"}); err == nil || !strings.Contains(err.Error(), "no proxy minion gw-dyn") {
		t.Errorf("proxy.remove again: %v", err)
	}
	if all, _ := tr.proxyStats(); all != 0 {
		t.Errorf("%d proxy minions after proxy.remove", all)
	}
	l, _ := tm.runner(t, "proxy.list", map[string]any{"relay": "r1"})
	if got := l.(map[string]any)["r1"]; len(got.([]any)) != 0 {
		t.Errorf("proxy.list after proxy.remove: %v", got)
	}
	tr.restart(t)
	if all, _ := tr.proxyStats(); all != 0 {
		t.Errorf("%d proxy minions after proxy.remove and a restart", all)
	}
}

// TestProxyAddLinkHandling: the master sends proxy.add only to a relay of
// capability 15 (an older one: a clear error, nothing sent), passes the
// runner's options through, drops an answer no request waits for, and
// gives the relay's refusal to the caller.
func TestProxyAddLinkHandling(t *testing.T) {
	tm := startMaster(t, true)
	ident, conn := dialNew(t, tm.Addr().String())
	old := &rawLink{conn: conn}
	_, old.ctrl = old.open(t, ident, &protocol.Hello{ID: "evil", Caps: protocol.CapProxyAdd - 1, Relay: true})
	_, err := tm.runner(t, "proxy.add", map[string]any{"relay": "evil", "id": "cam1", "proxytype": "http", "ip": "10.0.0.1"})
	if err == nil || !strings.Contains(err.Error(), "relay evil is of capability 14: run-time proxy minions need capability 15") {
		t.Errorf("proxy.add to a relay of capability 14: %v", err)
	}

	l := dialLink(t, tm, "r2")
	done := make(chan error, 1)
	go func() {
		_, err := tm.runner(t, "proxy.add", map[string]any{"relay": "r2", "id": "cam1", "proxytype": "http", "ip": "10.0.0.1", "port": 8080})
		done <- err
	}()
	b, err := l.ctrl.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	msg, err := protocol.DecodeLink(b)
	c, ok := msg.(*protocol.ProxyCtl)
	if err != nil || !ok {
		t.Fatalf("relay got %T %v, want a ProxyCtl", msg, err)
	}
	if c.Op != "add" || c.ID != "cam1" || c.Entry["proxytype"] != "http" || c.Entry["ip"] != "10.0.0.1" || c.Entry["relay"] != nil {
		t.Errorf("ProxyCtl: %+v", c)
	}
	if err := l.ctrl.Write(&protocol.ProxyAnswer{Req: c.Req + 1000}); err != nil {
		t.Fatal(err)
	}
	if err := l.ctrl.Write(&protocol.ProxyAnswer{Req: c.Req, Err: "not in my inventory"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "relay r2 refused: not in my inventory") {
			t.Errorf("proxy.add refused by the relay: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("proxy.add did not return")
	}
}
