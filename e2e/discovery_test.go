package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The site discovery test runs a relay on a site network the test makes:
// two network namespaces joined by a veth pair. The relay's namespace
// holds the master too (on its loopback) and the relay's end, 10.77.1.1/24;
// the other holds the camera: its end of the veth (10.77.1.5/24, a
// Hikvision MAC, so the relay names the vendor from its OUI; the kernel
// answers the relay's ARP sweep), the WS-Discovery, SSDP and mDNS
// responders of relay/discovery's own tests (that package's test binary,
// run as its "devices" helper), and dropbear on port 22.

var discoveryBin struct {
	once sync.Once
	path string
	err  error
}

// cameraResponders builds relay/discovery's test binary once: its
// "devices" helper answers WS-Discovery (ONVIF scopes: manufacturer
// Halite, hardware TestCam-1), SSDP and mDNS as a camera at 10.77.1.5.
func cameraResponders(t *testing.T) string {
	t.Helper()
	discoveryBin.once.Do(func() {
		discoveryBin.path = filepath.Join(binDir, "discovery.test")
		out, err := exec.Command("go", "test", "-c", "-o", discoveryBin.path, "../relay/discovery").CombinedOutput()
		if err != nil {
			discoveryBin.err = fmt.Errorf("build relay/discovery's test binary: %v\n%s", err, out)
		}
	})
	if discoveryBin.err != nil {
		t.Fatal(discoveryBin.err)
	}
	return discoveryBin.path
}

// siteNetns makes the relay's and the camera's namespaces and the veth
// between them, and returns the namespaces and the veth's ends. It
// fails (never skips) when CI=true or as root and namespaces cannot be
// made.
func siteNetns(t *testing.T) (nsR, nsD, vR, vD string) {
	t.Helper()
	tag := fmt.Sprintf("%d", os.Getpid()%100000)
	nsR, nsD = "hlsR"+tag, "hlsD"+tag
	vR, vD = "hsr"+tag, "hsd"+tag
	for _, ns := range []string{nsR, nsD} {
		if ok, why := netns(t, ns); !ok {
			if os.Getenv("CI") == "true" || os.Geteuid() == 0 {
				t.Fatalf("network namespaces are refused (%s): the site discovery test needs them (run as root)", why)
			}
			t.Skipf("network namespaces are refused (%s); this test needs root", why)
		}
	}
	ipCmd(t, "link", "add", vR, "netns", nsR, "type", "veth", "peer", "name", vD, "netns", nsD)
	ipCmd(t, "-n", nsD, "link", "set", vD, "address", cameraMAC)
	ipCmd(t, "-n", nsR, "addr", "add", "10.77.1.1/24", "dev", vR)
	ipCmd(t, "-n", nsD, "addr", "add", "10.77.1.5/24", "dev", vD)
	for _, a := range [][]string{{nsR, vR}, {nsR, "lo"}, {nsD, vD}, {nsD, "lo"}} {
		ipCmd(t, "-n", a[0], "link", "set", a[1], "up")
	}
	return nsR, nsD, vR, vD
}

// cameraMAC is the camera's MAC: an OUI of Hangzhou Hikvision.
const cameraMAC = "c0:56:e3:00:77:05"

// discoveryList runs halite-run discovery.list --out json with args and
// returns r1's records.
func (c *cluster) discoveryList(args ...string) []map[string]any {
	c.t.Helper()
	r := c.cli("halite-run", append([]string{"discovery.list", "--out", "json"}, args...)...)
	if r.code != 0 {
		c.t.Fatalf("halite-run discovery.list %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	var m map[string][]map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		c.t.Fatalf("halite-run discovery.list %v: not JSON: %v\n%s", args, err, r.stdout)
	}
	return m["r1"]
}

// TestDiscoveryFlash: a relay with discovery: (ARP and ONVIF on its veth)
// finds the camera; the master fires halite/relay/r1/discovery/new with the
// record and discovery.list shows it with its vendor (from the MAC), its
// model (from the WS-Discovery scopes) and managed False. halite-flash ssh
// --from-discovery then takes the camera from there: a dry run changes
// nothing, a filter matching nothing fails, and the real run flashes it
// over SSH with the relay as its way to the master. The new agent comes up
// through the relay, which then marks the device managed (discovery/changed),
// so the same filter no longer matches it.
func TestDiscoveryFlash(t *testing.T) {
	nsR, nsD, vR, vD := siteNetns(t)
	needSSHServers(t, "dropbear")
	c := newCluster(t, "relay_allow: [r1]\n")
	c.netns = nsR

	ready := filepath.Join(t.TempDir(), "ready")
	c.agents["camera"] = c.startRawEnv([]string{"HALITE_DISCOVERY_HELPER=devices", "HD_IF=" + vD, "HD_READY=" + ready},
		"/usr/sbin/ip", "netns", "exec", nsD, cameraResponders(t), "-test.run=^$")
	waitFor(t, 30*time.Second, "the camera's responders", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	key, authorized := clientKey(t)
	cam := startDeviceAt(t, nsD, "10.77.1.5:22", "dropbear", authorized, "")
	os.WriteFile(filepath.Join(cam.dir, "etc", "halite-id"), []byte("cam-found\n"), 0o644)

	c.startMaster()
	lines := c.eventStream(t)
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
      onvif:
        interfaces: [%s]
`, rPort, vR, vR))
	c.acceptAll("r1")

	// The event: the relay's own, with the whole record.
	found := discoveryEvent(t, lines, "halite/relay/r1/discovery/new", func(rec map[string]any) bool {
		ips, _ := rec["ips"].([]any)
		return slices.Contains(ips, any("10.77.1.5"))
	})
	t.Logf("discovery/new: %v", found)

	// discovery.list: vendor, model, unmanaged, and nothing but the camera.
	var rec map[string]any
	waitFor(t, 60*time.Second, "discovery.list showing the camera with its ONVIF model", func() bool {
		l := c.discoveryList()
		if len(l) != 1 {
			return false
		}
		onvif, _ := l[0]["onvif"].(map[string]any)
		rec = l[0]
		return l[0]["mac"] == cameraMAC && onvif["model"] == "TestCam-1"
	})
	onvif, _ := rec["onvif"].(map[string]any)
	if v, _ := rec["vendor"].(string); !strings.Contains(v, "Hikvision") || onvif["manufacturer"] != "Halite" || rec["managed"] != false || rec["key"] != cameraMAC {
		t.Errorf("the camera's record: %v; want vendor Hikvision, manufacturer Halite, managed false, key %s", rec, cameraMAC)
	}
	if l := c.discoveryList("model=TestCam-1", "unmanaged=True"); len(l) != 1 {
		t.Errorf("discovery.list model=TestCam-1 unmanaged=True: %v", l)
	}

	// The operator has checked the camera's host key (a dry run records
	// none, so an unknown one would fail it).
	known := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(known, []byte("10.77.1.5 "+cam.hostPub+"\n"), 0o600)
	flash := func(extra ...string) (flashResult, result) {
		t.Helper()
		args := append([]string{"--key", key, "--known-hosts", known, "--state", "",
			"--id-from", "file:/etc/halite-id", "--relay", fmt.Sprintf("10.77.1.1:%d", rPort)}, extra...)
		r := c.flashRaw(nsR, nil, args...)
		var doc struct{ Results []flashResult }
		if r.code == 0 || r.stdout != "" {
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Results) != 1 {
				t.Fatalf("halite-flash ssh %v: exit %d, want one result as JSON (%v)\n%s\nstderr: %s", extra, r.code, err, r.stdout, r.stderr)
			}
			return doc.Results[0], r
		}
		return flashResult{}, r
	}

	// A dry run, from the inventory: says what it would do, changes nothing.
	before := tree(t, cam.dir)
	got, r := flash("--from-discovery", "model=TestCam-1 vendor=*Hikvision*", "--dry-run")
	if r.code != 0 || got.Host != "10.77.1.5" || got.Status != "dry-run" || got.ID != "cam-found" || !strings.Contains(got.Detail, "would send amd64 agent") {
		t.Errorf("dry run: exit %d, %+v\n%s", r.code, got, r.stderr)
	}
	if !strings.Contains(r.stderr, "halite-flash: from relay r1: 10.77.1.5 ("+cameraMAC+")") || !strings.Contains(r.stderr, "TestCam-1") {
		t.Errorf("dry run: stderr does not say which device it took:\n%s", r.stderr)
	}
	if after := tree(t, cam.dir); after != before {
		t.Errorf("the dry run changed the device:\nbefore\n%s\nafter\n%s", before, after)
	}

	// A filter matching nothing: exit 1, nothing flashed.
	if _, r := flash("--from-discovery", "model=DS-2CD*"); r.code != 1 || !strings.Contains(r.stderr, "no device of the relays' inventories matches") {
		t.Errorf("model=DS-2CD*: exit %d, want 1 and no device matches\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The real run.
	got, r = flash("--from-discovery", "relay=r1,model=TestCam-*")
	if r.code != 0 || got.Status != "ok" || got.ID != "cam-found" || got.Finger == "" {
		t.Fatalf("flash: exit %d, %+v\n%s", r.code, got, r.stderr)
	}
	conf, _ := readFile(filepath.Join(cam.dir, "etc", "halite", "agent"))
	if !strings.Contains(conf, "10.77.1.1") {
		t.Errorf("the camera's agent config does not go through the relay:\n%s", conf)
	}
	c.waitUp("cam-found")

	// Its relay session comes from the camera's address: managed now.
	waitFor(t, 60*time.Second, "the camera managed in discovery.list", func() bool {
		l := c.discoveryList()
		return len(l) == 1 && l[0]["managed"] == true && l[0]["id"] == "cam-found"
	})
	discoveryEvent(t, lines, "halite/relay/r1/discovery/changed", func(rec map[string]any) bool {
		return rec["key"] == cameraMAC && rec["managed"] == true && rec["id"] == "cam-found"
	})
	if l := c.discoveryList("model=TestCam-1", "unmanaged=True"); len(l) != 0 {
		t.Errorf("discovery.list unmanaged=True still lists the flashed camera: %v", l)
	}
	if _, r := flash("--from-discovery", "model=TestCam-1", "--dry-run"); r.code != 1 || !strings.Contains(r.stderr, "unmanaged=False") {
		t.Errorf("after flashing, model=TestCam-1: exit %d, want 1 (the camera is managed)\n%s", r.code, r.stderr)
	}
	got, r = flash("--from-discovery", "model=TestCam-1 unmanaged=False", "--dry-run")
	if r.code != 0 || got.Status != "dry-run" || got.Host != "10.77.1.5" {
		t.Errorf("unmanaged=False dry run: exit %d, %+v\n%s", r.code, got, r.stderr)
	}
}

// discoveryEvent waits up to a minute for the relay r1's event tag whose
// record (its data) ok accepts, and returns the record.
func discoveryEvent(t *testing.T, lines <-chan string, tag string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, more := <-lines:
			if !more {
				t.Fatalf("event stream ended before %s", tag)
			}
			got, js, _ := strings.Cut(l, "\t")
			if got != tag {
				continue
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(js), &ev); err != nil {
				t.Fatalf("%s: data is not JSON: %v", tag, err)
			}
			rec, _ := ev["data"].(map[string]any)
			if ev["id"] != "r1" || rec == nil {
				t.Fatalf("%s: %v, want the relay's event (id r1, the record in data)", tag, ev)
			}
			if ok(rec) {
				return rec
			}
		case <-deadline:
			t.Fatalf("no %s event as wanted within 60s", tag)
		}
	}
}
