package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProxyAddFromReactor: proxy minions "created from discovery by a
// reactor" (issue 19). A relay with ARP discovery on the site veth finds
// the device at 10.77.1.5 (an HTTP server, python3's http.server, in the
// device's namespace); the master's reaction to
// halite/relay/*/discovery/new calls runner.proxy.add with the record's
// MAC; the relay makes the proxy minion, whose key waits "proxied by r1";
// accepted, it answers test.ping (GET / on the device). halite-run
// proxy.list shows it; proxy.remove ends it.
func TestProxyAddFromReactor(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 (the device's HTTP server) is not installed")
	}
	nsR, nsD, vR, _ := siteNetns(t)
	root := t.TempDir()
	react := filepath.Join(root, "add.sls")
	if err := os.WriteFile(react, []byte(`{% if 'mac' in data['data'] %}
add_proxy:
  runner.proxy.add:
    - args:
      - relay: {{ data['id'] }}
      - id: site-web
      - proxytype: http
      - mac: {{ data['data']['mac'] }}
      - port: 8080
      - health_path: /
{% endif %}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, "relay_allow: [r1]\nreactor:\n  - 'halite/relay/*/discovery/new':\n    - "+react+"\n")
	c.netns = nsR
	c.agents["web"] = c.startRawEnv(nil, "/usr/sbin/ip", "netns", "exec", nsD, py, "-m", "http.server", "--bind", "10.77.1.5", "8080", "--directory", root)
	c.startMaster()
	rPort := freeUDPPort(t)
	c.startAt(nsR, "r1", fmt.Sprintf("127.0.0.1:%d", c.port), fmt.Sprintf(`relay:
  interface: 10.77.1.1
  port: %d
  heartbeat: 1
  discovery:
    interval: 10
    packets_per_second: 1000
    methods:
      arp:
        interfaces: [%s]
        subnets: [10.77.1.0/24]
`, rPort, vR))
	c.acceptAll("r1")
	waitFor(t, 60*time.Second, "site-web pending, proxied by r1", func() bool {
		r := c.cli("halite-key", "-l", "un")
		return strings.Contains(r.stdout, "site-web (proxied by r1)")
	})
	c.acceptAll("site-web")
	waitFor(t, 30*time.Second, "site-web answering test.ping", func() bool {
		m, _ := c.jsonOut("halite", "site-web", "test.ping")
		return m["site-web"] == true
	})
	r := c.cli("halite-run", "proxy.list", "--out", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"site-web"`) || !strings.Contains(r.stdout, `"http://10.77.1.5:8080/"`) {
		t.Errorf("halite-run proxy.list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.cli("halite-run", "proxy.add", "relay=r1", "id=elsewhere", "proxytype=http", "ip=10.77.1.99"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "not in the relay's discovery inventory") {
		t.Errorf("halite-run proxy.add of an address discovery did not find: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.cli("halite-run", "proxy.remove", "relay=r1", "id=site-web"); r.code != 0 {
		t.Errorf("halite-run proxy.remove: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.cli("halite-run", "proxy.list", "--out", "json"); strings.Contains(r.stdout, "site-web") {
		t.Errorf("proxy.list after proxy.remove: %s", r.stdout)
	}
}
