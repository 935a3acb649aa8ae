package relay

// The proxy minions on a real network: each simulated device (the SSH
// server, the ONVIF camera, the REST device) listens in a network
// namespace of its own, made by the test, joined to the relay's side (the
// test's own namespace: the master and the relay run in this process) by
// a veth pair. The devices' addresses (10.77.X.2) exist only in their
// namespaces, the relay's ends (10.77.X.1) only on its veths; taking one
// device's veth down cuts that device alone off.
//
// A device's listener is made on a goroutine locked to an OS thread that
// entered the device's namespace (setns): a socket stays in the namespace
// it was made in, whatever thread serves it afterwards, and the thread,
// never unlocked, ends with its goroutine, so no thread of the runtime
// is left in another namespace.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/sshtest"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// netnsPrefix names this test's namespaces (hpx<pid>-<k>) and the
// relay's ends of their veths (hpx<pid>r<k>).
const netnsPrefix = "hpx"

// needNetns skips the test unless it can make network namespaces (root,
// iproute2); in CI it fails instead.
func needNetns(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "makes network namespaces: run as root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "ip (iproute2) is missing: " + err.Error()
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}

func ipRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// leftoverPID returns the pid in name, one of this test's namespaces or
// links, if the process that made it is gone.
func leftoverPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, netnsPrefix)
	if !ok {
		return 0, false
	}
	i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(rest[:i])
	if err != nil || pid == os.Getpid() {
		return 0, false
	}
	err = syscall.Kill(pid, 0)
	return pid, errors.Is(err, syscall.ESRCH)
}

// removeLeftovers deletes the namespaces and links that earlier runs of
// this test, killed before their cleanup, left.
func removeLeftovers(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(ipRun(t, "netns", "list"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if _, gone := leftoverPID(f[0]); gone {
			t.Logf("removing namespace %s left by an earlier run", f[0])
			exec.Command("ip", "netns", "del", f[0]).Run()
		}
	}
	for _, line := range strings.Split(ipRun(t, "-o", "link", "show"), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if _, gone := leftoverPID(name); gone {
			t.Logf("removing link %s left by an earlier run", name)
			exec.Command("ip", "link", "del", name).Run()
		}
	}
}

// netDevice is one device's namespace and veth pair.
type netDevice struct {
	ns, relayIf, devIf string
	relayAddr, addr    string // 10.77.X.1 (the relay's end), 10.77.X.2
}

// newNetDevices makes n namespaces, each joined to this one by a veth
// pair on a /24 of its own; they are deleted with the test.
func newNetDevices(t *testing.T, n int) []*netDevice {
	t.Helper()
	needNetns(t)
	removeLeftovers(t)
	pid := os.Getpid()
	base := 128 + (pid%40)*3 // apart from another run's, and from the discovery tests' 10.77.0.0/22
	var devs []*netDevice
	for k := range n {
		d := &netDevice{ns: fmt.Sprintf("%s%d-%d", netnsPrefix, pid, k),
			relayIf: fmt.Sprintf("%s%dr%d", netnsPrefix, pid, k), devIf: fmt.Sprintf("%s%dd%d", netnsPrefix, pid, k),
			relayAddr: fmt.Sprintf("10.77.%d.1", base+k), addr: fmt.Sprintf("10.77.%d.2", base+k)}
		ipRun(t, "netns", "add", d.ns)
		t.Cleanup(func() {
			// Deleting the namespace deletes its veth, and the peer here.
			if out, err := exec.Command("ip", "netns", "del", d.ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v\n%s", d.ns, err, out)
			}
		})
		ipRun(t, "link", "add", d.relayIf, "type", "veth", "peer", "name", d.devIf, "netns", d.ns)
		ipRun(t, "addr", "add", d.relayAddr+"/24", "dev", d.relayIf)
		ipRun(t, "link", "set", d.relayIf, "up")
		ipRun(t, "-n", d.ns, "addr", "add", d.addr+"/24", "dev", d.devIf)
		ipRun(t, "-n", d.ns, "link", "set", d.devIf, "up")
		ipRun(t, "-n", d.ns, "link", "set", "lo", "up")
		devs = append(devs, d)
	}
	return devs
}

// listen makes a TCP listener on port of d's address, in d's namespace.
func (d *netDevice) listen(t *testing.T, port int) net.Listener {
	t.Helper()
	f, err := os.Open("/run/netns/" + d.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, now in d.ns, ends with this
		// goroutine instead of going back to the runtime's pool.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %w", d.ns, err)}
			return
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(d.addr, strconv.Itoa(port)))
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatalf("listen in %s: %v", d.ns, r.err)
	}
	return r.ln
}

// timedReturn is one minion's return of publishTimed, and when it came.
type timedReturn struct {
	ret   any
	after time.Duration
}

// publishTimed runs a job and returns each minion's return with the time
// it took to arrive, and the minions reported missing.
func publishTimed(t *testing.T, tm *testMaster, tgt, fun string, timeout float64, arg ...any) (map[string]timedReturn, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout+time.Duration(timeout)*time.Second)
	defer cancel()
	start := time.Now()
	c, err := api.Dial(ctx, tm.sock, &api.Request{Op: api.OpPublish, Tgt: tgt, TgtType: "compound", Fun: fun, Arg: arg, Timeout: timeout, User: "tester"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	defer c.Close()
	rets := map[string]timedReturn{}
	for {
		r, err := c.Next()
		if err != nil {
			t.Fatalf("publish %s %s: %v", tgt, fun, err)
		}
		switch r.Kind {
		case api.KindReturn:
			id, _ := r.Data["id"].(string)
			rets[id] = timedReturn{r.Data["return"], time.Since(start)}
		case api.KindError:
			t.Fatalf("publish %s %s: %s", tgt, fun, r.Error)
		}
		if r.Done {
			return rets, r.Missing
		}
	}
}

// TestProxyMinionsNetns: proxy minions (ssh, onvif, http) answer jobs for
// devices that the relay reaches over veth pairs into namespaces of their
// own; a device whose veth goes down fails its own calls within its
// timeout while the others answer, and answers again once it is back up.
func TestProxyMinionsNetns(t *testing.T) {
	devs := newNetDevices(t, 3)
	sshDev, camDev, restDev := devs[0], devs[1], devs[2]

	srv, err := sshtest.Serve(sshDev.listen(t, 22), "admin", "sshpw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cam := proxytest.NewCameraOn(camDev.listen(t, 80), "admin", "campw")
	t.Cleanup(cam.Close)
	rest := proxytest.NewRESTDeviceOn(restDev.listen(t, 80), "u", "p", nil)
	t.Cleanup(rest.Close)
	// The devices are reachable from here only through their veths.
	for _, d := range devs {
		if _, err := net.InterfaceByName(d.devIf); err == nil {
			t.Fatalf("%s is in the relay's namespace", d.devIf)
		}
	}

	const restTimeout = 3 // seconds
	entries := []config.Proxy{
		{ID: "cam-ssh", ProxyType: "ssh", Host: sshDev.addr, Port: 22, Username: "admin", Password: "sshpw",
			AcceptNewHostKey: true, KnownHosts: t.TempDir() + "/known_hosts", Timeout: 10},
		{ID: "cam-onvif", ProxyType: "onvif", URL: "http://" + camDev.addr + "/onvif/device_service",
			Username: "admin", Password: "campw", Timeout: 10},
		{ID: "gw-http", ProxyType: "http", URL: "http://" + restDev.addr + "/", Username: "u", Password: "p",
			HealthPath: "/health", Timeout: restTimeout},
	}
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = entries }, nil)
	waitFor(t, "the proxy minions' sessions", func() bool { _, up := tr.proxyStats(); return up == 3 })

	rets, missing := publishTimed(t, tm, "*", "test.ping", 20)
	for _, id := range []string{"r1", "cam-ssh", "cam-onvif", "gw-http"} {
		if rets[id].ret != true {
			t.Errorf("test.ping of %s: got %v, want true", id, rets[id].ret)
		}
	}
	if len(missing) != 0 || len(rets) != 4 {
		t.Errorf("test.ping: %d returns, missing %v", len(rets), missing)
	}
	rets, _ = publishTimed(t, tm, "cam-ssh", "cmd.run", 15, "uname -s")
	if rets["cam-ssh"].ret != "Linux" {
		t.Errorf("cmd.run uname -s on cam-ssh: got %v", rets["cam-ssh"].ret)
	}
	rets, _ = publishTimed(t, tm, "cam-onvif", "onvif.device_info", 15)
	if m, _ := rets["cam-onvif"].ret.(map[string]any); m["Model"] != "CAM-7" {
		t.Errorf("onvif.device_info on cam-onvif: got %v", rets["cam-onvif"].ret)
	}
	rets, _ = publishTimed(t, tm, "gw-http", "http.query", 15, "/api/status")
	if m, _ := rets["gw-http"].ret.(map[string]any); fmt.Sprint(m["status"]) != "200" ||
		!strings.Contains(fmt.Sprint(m["body"]), `"path":"/api/status"`) {
		t.Errorf("http.query /api/status on gw-http: got %v", rets["gw-http"].ret)
	}

	// The REST device's cable is pulled: its end of the veth goes down.
	ipRun(t, "-n", restDev.ns, "link", "set", restDev.devIf, "down")
	rets, missing = publishTimed(t, tm, "*", "test.ping", 20)
	if len(missing) != 0 {
		t.Errorf("test.ping with gw-http cut off: missing %v", missing)
	}
	gw := rets["gw-http"]
	if gw.ret != false {
		t.Errorf("test.ping of gw-http cut off: got %v, want false", gw.ret)
	}
	// Its timeout, and the relay's and master's share of a loaded machine.
	if limit := restTimeout*time.Second + 5*time.Second; gw.after > limit {
		t.Errorf("test.ping of gw-http cut off took %v, want at most %v", gw.after, limit)
	}
	for _, id := range []string{"cam-ssh", "cam-onvif"} {
		if r := rets[id]; r.ret != true || r.after >= gw.after {
			t.Errorf("test.ping of %s beside gw-http cut off: got %v after %v (gw-http: %v)", id, r.ret, r.after, gw.after)
		}
	}
	t.Logf("with gw-http cut off: gw-http false after %v, cam-ssh %v, cam-onvif %v", gw.after, rets["cam-ssh"].after, rets["cam-onvif"].after)
	rets, _ = publishTimed(t, tm, "gw-http", "http.query", 20, "/api/status")
	if r := rets["gw-http"]; !strings.Contains(fmt.Sprint(r.ret), "ERROR") || r.after > restTimeout*time.Second+5*time.Second {
		t.Errorf("http.query on gw-http cut off: got %v after %v, want an error within its timeout", r.ret, r.after)
	}

	// Back up, it answers again.
	ipRun(t, "-n", restDev.ns, "link", "set", restDev.devIf, "up")
	rets, _ = publishTimed(t, tm, "gw-http", "test.ping", 20)
	if rets["gw-http"].ret != true {
		t.Errorf("test.ping of gw-http back up: got %v", rets["gw-http"].ret)
	}
}
