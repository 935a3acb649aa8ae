package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halite-fleet/halite/internal/sshtest"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// TestProxyMinions: a relay (a real halite-agent process) with four proxy
// minions: an SSH box, an ONVIF camera whose password comes from the
// relay's pillar (compiled and sealed by the master), a REST gateway and a
// REST gateway that hangs; the devices are servers of this test on
// loopback. Their keys wait, marked proxied by the relay, until accepted;
// then `halite '*' test.ping`, grain targeting and cmd.run work as for
// agents, and the hanging gateway costs only its own return.
func TestProxyMinions(t *testing.T) {
	ssh, err := sshtest.Start("127.0.0.1:0", "admin", "sshpw")
	if err != nil {
		t.Fatal(err)
	}
	defer ssh.Close()
	cam := proxytest.NewCamera("admin", "cam-secret")
	defer cam.Close()
	gw := proxytest.NewRESTDevice("u", "p", nil)
	defer gw.Close()
	hang := make(chan struct{})
	slow := proxytest.NewRESTDevice("u", "p", hang)
	defer slow.Close()
	defer close(hang)

	pdir := t.TempDir()
	for name, body := range map[string]string{
		"top.sls":     "base:\n  r1:\n    - proxies\n",
		"proxies.sls": "proxy:\n  cam-onvif:\n    password: cam-secret\n",
	} {
		if err := os.WriteFile(filepath.Join(pdir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCluster(t, relayAllow+fmt.Sprintf("pillar_roots:\n  base:\n    - %s\n", pdir))
	c.startMaster()
	sshHost, sshPort, _ := strings.Cut(ssh.Addr, ":")
	relay := fmt.Sprintf(`relay:
  interface: 127.0.0.1
  port: %d
  proxy:
    - id: cam-ssh
      proxytype: ssh
      host: %s
      port: %s
      username: admin
      password: sshpw
      accept_new_hostkey: true
    - id: cam-onvif
      proxytype: onvif
      url: %s
      username: admin
      password_pillar: proxy:cam-onvif:password
      grains: {site: depot}
    - id: gw-http
      proxytype: http
      url: %s
      username: u
      password: p
      health_path: /health
    - id: gw-hang
      proxytype: http
      url: %s
      health_path: /health
      timeout: 2
`, freeUDPPort(t), sshHost, sshPort, cam.URL(), gw.URL, slow.URL)
	c.startAgent("r1", relay)
	c.waitPending(1)
	if r := c.cli("halite-key", "-a", "r1", "-y"); r.code != 0 {
		t.Fatalf("halite-key -a r1: %s%s", r.stdout, r.stderr)
	}
	c.waitUp("r1")

	// The proxy minions' keys wait, each marked with its relay.
	c.waitPending(4)
	if r := c.cli("halite-key", "-l", "un"); r.stdout != "Unaccepted Keys:\ncam-onvif (proxied by r1)\ncam-ssh (proxied by r1)\ngw-hang (proxied by r1)\ngw-http (proxied by r1)\n" {
		t.Errorf("halite-key -l un: got %q", r.stdout)
	}
	c.acceptAll("r1", "cam-ssh", "cam-onvif", "gw-http", "gw-hang")
	if r := c.cli("halite-key", "-l", "acc"); !strings.Contains(r.stdout, "cam-ssh (proxied by r1)\n") || !strings.Contains(r.stdout, "\nr1\n") {
		t.Errorf("halite-key -l acc: got %q", r.stdout)
	}

	start := time.Now()
	m, r := c.jsonOut("halite", "*", "test.ping")
	for id, want := range map[string]any{"r1": true, "cam-ssh": true, "cam-onvif": true, "gw-http": true, "gw-hang": false} {
		if m[id] != want {
			t.Errorf("test.ping '*': %s returned %v, want %v\n%s%s", id, m[id], want, r.stdout, r.stderr)
		}
	}
	t.Logf("halite '*' test.ping with a hanging device (timeout 2s): %s", time.Since(start))

	// The camera checks the WS-Security digest made with the password
	// the relay read from its pillar.
	m, r = c.jsonOut("halite", "-G", "proxytype:onvif", "onvif.device_info")
	if info, _ := m["cam-onvif"].(map[string]any); len(m) != 1 || info["Model"] != "CAM-7" {
		t.Errorf("halite -G proxytype:onvif onvif.device_info: got %v\n%s%s", m, r.stdout, r.stderr)
	}
	m, r = c.jsonOut("halite", "-G", "site:depot", "test.echo", "hi")
	if len(m) != 1 || m["cam-onvif"] != "hi" {
		t.Errorf("halite -G site:depot test.echo: got %v\n%s", m, r.stderr)
	}
	m, r = c.jsonOut("halite", "cam-ssh", "cmd.run", "uname -a")
	if s, _ := m["cam-ssh"].(string); !strings.HasPrefix(s, "Linux ") {
		t.Errorf("halite cam-ssh cmd.run 'uname -a': got %v\n%s", m, r.stderr)
	}
	// The hanging gateway holds nobody else: the others answer at once.
	start = time.Now()
	m, r = c.jsonOut("halite", "-L", "gw-http,cam-onvif,cam-ssh", "test.ping")
	if m["gw-http"] != true || m["cam-onvif"] != true || m["cam-ssh"] != true {
		t.Errorf("test.ping beside the hanging gateway: got %v\n%s", m, r.stderr)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("three healthy proxy minions took %s", el)
	}

	// manage.status counts them up; the job cache has their returns.
	m, r = c.jsonOut("halite-run", "manage.status")
	if up := fmt.Sprint(m["up"]); !strings.Contains(up, "cam-onvif") || !strings.Contains(up, "gw-hang") {
		t.Errorf("manage.status: got %v\n%s", m, r.stderr)
	}
}
