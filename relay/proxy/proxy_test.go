package proxy

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/sshtest"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

func newMinion(t *testing.T, e config.Proxy, pillar map[string]any) *Minion {
	t.Helper()
	if e.Timeout == 0 {
		e.Timeout = 5
	}
	m, err := New(Options{Entry: e, Relay: "relay1", PkiDir: t.TempDir(), Version: "9.9",
		Pillar: func() map[string]any { return pillar }})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func call(m *Minion, fun string, arg ...any) Result {
	return m.Call(context.Background(), fun, arg, nil, m.baseGrains(), 0)
}

// TestSSH runs the ssh type's functions against an x/crypto/ssh server on
// loopback, the password from the relay's pillar and the host key from
// known_hosts.
func TestSSH(t *testing.T) {
	srv, err := sshtest.Start("127.0.0.1:0", "admin", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host, port := splitHostPort(t, srv.Addr)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, srv.HostKey)
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := config.Proxy{ID: "box1", ProxyType: "ssh", Host: host, Port: port, Username: "admin",
		PasswordPillar: "proxy:box1:password", KnownHosts: kh}
	m := newMinion(t, e, map[string]any{"proxy": map[string]any{"box1": map[string]any{"password": "s3cret"}}})

	if r := call(m, "test.ping"); r.Return != true {
		t.Fatalf("test.ping: got %#v", r)
	}
	if r := call(m, "cmd.run", "echo hello; echo err >&2; exit 3"); r.Return != "hello\nerr" || r.Retcode != 3 {
		t.Errorf("cmd.run: got %#v, want output hello\\nerr and retcode 3", r)
	}
	if r := call(m, "cmd.retcode", "exit 7"); r.Return != 7 || r.Retcode != 7 {
		t.Errorf("cmd.retcode: got %#v", r)
	}
	f := filepath.Join(t.TempDir(), "it's here")
	if r := call(m, "file.write", f, "line one", "line two"); r.Retcode != 0 {
		t.Fatalf("file.write: %#v", r)
	}
	if r := call(m, "file.read", f); r.Return != "line one\nline two\n" {
		t.Errorf("file.read: got %#v", r)
	}
	if r := call(m, "file.file_exists", f); r.Return != true {
		t.Errorf("file.file_exists of a file: got %#v", r)
	}
	if r := call(m, "file.file_exists", f+"-no"); r.Return != false {
		t.Errorf("file.file_exists of nothing: got %#v", r)
	}
	if r := call(m, "file.read", f+"-no"); r.Retcode != RetcodeGeneric || !strings.HasPrefix(r.Return.(string), "ERROR: ") {
		t.Errorf("file.read of nothing: got %#v", r)
	}
	g := m.Grains(context.Background())
	if g["kernel"] != "Linux" || g["proxytype"] != "ssh" || g["proxied_by"] != "relay1" || g["num_cpus"] == nil {
		t.Errorf("grains: got %v", g)
	}
	if r := call(m, "nosuch.fun"); r.Return != "'nosuch.fun' is not available." || r.Retcode != 1 {
		t.Errorf("unknown function: got %#v", r)
	}

	// Wrong password from the pillar: the call fails, says why.
	bad := newMinion(t, e, map[string]any{"proxy": map[string]any{"box1": map[string]any{"password": "nope"}}})
	if r := call(bad, "cmd.run", "true"); r.Retcode != 1 || !strings.Contains(fmt.Sprint(r.Return), "unable to authenticate") {
		t.Errorf("wrong password: got %#v", r)
	}
	// No pillar key and no password: told where to put it.
	none := newMinion(t, e, map[string]any{})
	if r := call(none, "cmd.run", "true"); !strings.Contains(fmt.Sprint(r.Return), "pillar proxy:box1:password is not in the relay's pillar") {
		t.Errorf("missing pillar: got %#v", r)
	}
}

// TestSSHHostKey: a device whose host key is not in known_hosts is
// refused (no command runs); with accept_new_hostkey it is recorded, and
// a changed key is refused after that.
func TestSSHHostKey(t *testing.T) {
	srv, err := sshtest.Start("127.0.0.1:0", "admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host, port := splitHostPort(t, srv.Addr)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	e := config.Proxy{ID: "box2", ProxyType: "ssh", Host: host, Port: port, Username: "admin", Password: "pw", KnownHosts: kh}
	m := newMinion(t, e, nil)
	if r := call(m, "cmd.run", "true"); !strings.Contains(fmt.Sprint(r.Return), "is not in "+kh) || srv.Count() != 0 {
		t.Fatalf("unknown host key: got %#v, %d commands run", r, srv.Count())
	}
	e.AcceptNewHostKey = true
	m = newMinion(t, e, nil)
	if r := call(m, "cmd.run", "echo ok"); r.Return != "ok" {
		t.Fatalf("accept new: got %#v", r)
	}
	// Another server on the same address has another key.
	srv.Close()
	srv2, err := sshtest.Start(srv.Addr, "admin", "pw")
	if err != nil {
		t.Skipf("port taken again meanwhile: %v", err)
	}
	defer srv2.Close()
	if r := call(m, "cmd.run", "echo ok"); !strings.Contains(fmt.Sprint(r.Return), "HOST KEY CHANGED") || srv2.Count() != 0 {
		t.Fatalf("changed key: got %#v", r)
	}
}

// TestONVIF runs the onvif type against a camera that checks the
// WS-Security PasswordDigest.
func TestONVIF(t *testing.T) {
	cam := proxytest.NewCamera("admin", "campw")
	defer cam.Close()
	e := config.Proxy{ID: "cam7", ProxyType: "onvif", URL: cam.URL(), Username: "admin", PasswordPillar: "proxy:cam7:password"}
	m := newMinion(t, e, map[string]any{"proxy": map[string]any{"cam7": map[string]any{"password": "campw"}}})
	r := call(m, "onvif.device_info")
	want := map[string]any{"Manufacturer": "Acme", "Model": "CAM-7", "FirmwareVersion": "2.4.1", "SerialNumber": "SN123", "HardwareId": "HW9"}
	if d := cmp.Diff(want, r.Return); d != "" || r.Retcode != 0 {
		t.Fatalf("onvif.device_info (-want +got):\n%s", d)
	}
	// The media service is asked on the camera's own address, not the
	// one it names (10.9.9.9).
	if r := call(m, "onvif.snapshot_uri"); r.Return != "http://10.9.9.9/snap/main.jpg" {
		t.Errorf("onvif.snapshot_uri: got %#v", r)
	}
	if r := m.Call(context.Background(), "onvif.snapshot_uri", nil, map[string]any{"profile": "sub"}, nil, 0); r.Return != "http://10.9.9.9/snap/sub.jpg" {
		t.Errorf("onvif.snapshot_uri profile=sub: got %#v", r)
	}
	if r := call(m, "onvif.set_ntp", []any{"192.0.2.1", "ntp.example.org"}); r.Retcode != 0 || !cmp.Equal(cam.NTP(), []string{"192.0.2.1", "ntp.example.org"}) {
		t.Errorf("onvif.set_ntp: got %#v, camera has %v", r, cam.NTP())
	}
	if r := call(m, "onvif.reboot"); r.Return != "Rebooting in 5 seconds" || cam.Reboots() != 1 {
		t.Errorf("onvif.reboot: got %#v, %d reboots", r, cam.Reboots())
	}
	g := m.Grains(context.Background())
	if g["manufacturer"] != "Acme" || g["model"] != "CAM-7" || g["proxytype"] != "onvif" {
		t.Errorf("grains: %v", g)
	}
	if r := call(m, "test.ping"); r.Return != true {
		t.Errorf("test.ping: got %#v", r)
	}
	// A wrong password is the camera's fault, reported.
	bad := newMinion(t, config.Proxy{ID: "cam7", ProxyType: "onvif", URL: cam.URL(), Username: "admin", Password: "wrong"}, nil)
	if r := call(bad, "onvif.device_info"); r.Retcode != 1 || !strings.Contains(fmt.Sprint(r.Return), "NotAuthorized") {
		t.Errorf("wrong password: got %#v", r)
	}
}

// TestPasswordDigest pins the digest on the example of the ONVIF
// Application Programmer's Guide (5.12.2.1): nonce
// LKqI6G/AikKCQrN0zqZFlg==, created 2010-09-16T07:50:45Z, password
// userpassword give tuOSpGlFlIXsozq4HFNeeGeFLEI=.
func TestPasswordDigest(t *testing.T) {
	nonce, _ := base64.StdEncoding.DecodeString("LKqI6G/AikKCQrN0zqZFlg==")
	tok := usernameTokenWith("user", "userpassword", nonce, "2010-09-16T07:50:45Z")
	if !strings.Contains(tok, ">tuOSpGlFlIXsozq4HFNeeGeFLEI=<") {
		t.Errorf("digest: got %s", tok)
	}
}

// TestHTTP runs http.query and test.ping against a REST device, and shows
// that a hanging device costs its own call its timeout, no more.
func TestHTTP(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	dev := proxytest.NewRESTDevice("u", "p", nil)
	defer dev.Close()
	m := newMinion(t, config.Proxy{ID: "api1", ProxyType: "http", URL: dev.URL, Username: "u", Password: "p", HealthPath: "/health"}, nil)
	if r := call(m, "test.ping"); r.Return != true {
		t.Fatalf("test.ping: %#v", r)
	}
	// The host grain is the base URL's; the relay keeps no grains of an
	// http device (DeviceGrains: nil), and makes the same set from them.
	g := m.Grains(context.Background())
	if g["host"] != "127.0.0.1" || g["url"] != dev.URL || g["proxytype"] != "http" || g["os"] != "proxy" {
		t.Errorf("grains: %v", g)
	}
	if dg := m.DeviceGrains(context.Background()); dg != nil {
		t.Errorf("device grains of an http device: got %v, want none", dg)
	}
	if d := cmp.Diff(g, m.GrainsWith(nil)); d != "" {
		t.Errorf("GrainsWith(nil) (-Grains +GrainsWith):\n%s", d)
	}
	r := m.Call(context.Background(), "http.query", []any{"/api/status"}, map[string]any{"method": "post", "data": "x=1"}, nil, 0)
	want := map[string]any{"status": 200, "body": `{"method":"POST","path":"/api/status","body":"x=1"}`}
	if d := cmp.Diff(want, r.Return); d != "" {
		t.Errorf("http.query (-want +got):\n%s", d)
	}
	if r := call(m, "http.query", "http://example.org/api/x"); r.Retcode != 1 || !strings.Contains(fmt.Sprint(r.Return), "is not on this device") {
		t.Errorf("http.query elsewhere: got %#v", r)
	}
	noauth := newMinion(t, config.Proxy{ID: "api1", ProxyType: "http", URL: dev.URL}, nil)
	if r := call(noauth, "http.query", "/api/x"); r.Retcode != 1 || r.Return.(map[string]any)["status"] != 401 {
		t.Errorf("http.query without credentials: got %#v", r)
	}

	slow := proxytest.NewRESTDevice("u", "p", hang)
	defer slow.Close()
	sm := newMinion(t, config.Proxy{ID: "api2", ProxyType: "http", URL: slow.URL, HealthPath: "/health", Timeout: 1}, nil)
	start := time.Now()
	if r := call(sm, "test.ping"); r.Return != false {
		t.Errorf("hanging test.ping: got %#v", r)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("hanging device held the call %s, timeout 1s", el)
	}
	// A job's shorter timeout wins.
	start = time.Now()
	sm.Call(context.Background(), "http.query", []any{"/health"}, nil, nil, 200*time.Millisecond)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("job timeout 200ms: call took %s", el)
	}
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	var p int
	fmt.Sscan(addr[i+1:], &p)
	return addr[:i], p
}
