package discovery

// The real-network tests: two network namespaces joined by a veth pair,
// made by the test. The relay's side runs the Discoverer in one; the
// devices are in the other: macvlan interfaces on the veth, each with its
// own MAC and address (the kernel answers the ARP sweep), and the camera's
// WS-Discovery, SSDP and mDNS responders. Each side is this test binary
// started again under "ip netns exec" (TestMain), so that every socket
// and goroutine of it is in its namespace.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"go.uber.org/zap"
	"golang.org/x/net/ipv4"

	"github.com/halite-fleet/halite/config"
)

const helperEnv = "HALITE_DISCOVERY_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "relay":
		os.Exit(helperRelay())
	case "devices":
		os.Exit(helperDevices())
	case "flood":
		os.Exit(helperFlood())
	}
	fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
	os.Exit(2)
}

// site is the two namespaces of a test.
type site struct {
	relayNS, devNS string
	relayIf, devIf string
	relayMAC       net.HardwareAddr
	devMACs        map[string]string // device address -> its interface's MAC
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the discovery tests make network namespaces and must run as root in CI")
		}
		t.Skip("makes network namespaces: run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip (iproute2) is missing: %v", err)
	}
}

func ipCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newSite makes the namespaces: the relay at 10.77.0.1/22, devices at
// 10.77.1.5 (the camera, with the responders), 10.77.2.9 and 10.77.3.200.
func newSite(t *testing.T) *site {
	needRoot(t)
	id := strconv.Itoa(os.Getpid() % 100000)
	s := &site{relayNS: "hdr" + id, devNS: "hdd" + id, relayIf: "hdr" + id, devIf: "hdd" + id, devMACs: map[string]string{}}
	ipCmd(t, "netns", "add", s.relayNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", s.relayNS).Run() })
	ipCmd(t, "netns", "add", s.devNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", s.devNS).Run() })
	ipCmd(t, "-n", s.relayNS, "link", "add", s.relayIf, "type", "veth", "peer", "name", s.devIf, "netns", s.devNS)
	ipCmd(t, "-n", s.relayNS, "addr", "add", "10.77.0.1/22", "dev", s.relayIf)
	ipCmd(t, "-n", s.relayNS, "link", "set", s.relayIf, "up")
	ipCmd(t, "-n", s.relayNS, "link", "set", "lo", "up")
	ipCmd(t, "-n", s.devNS, "link", "set", s.devIf, "up")
	ipCmd(t, "-n", s.devNS, "link", "set", "lo", "up")
	// Each device answers ARP for its own address only.
	for _, k := range []string{"all", "default"} {
		if out, err := exec.Command("ip", "netns", "exec", s.devNS, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/"+k+"/arp_ignore").CombinedOutput(); err != nil {
			t.Fatalf("sysctl arp_ignore: %v\n%s", err, out)
		}
	}
	for i, a := range []string{"10.77.1.5/22", "10.77.2.9/32", "10.77.3.200/32"} {
		mv := fmt.Sprintf("hdm%d", i)
		ipCmd(t, "-n", s.devNS, "link", "add", mv, "link", s.devIf, "type", "macvlan", "mode", "bridge")
		ipCmd(t, "-n", s.devNS, "addr", "add", a, "dev", mv)
		ipCmd(t, "-n", s.devNS, "link", "set", mv, "up")
		out := ipCmd(t, "-n", s.devNS, "-o", "link", "show", mv)
		f := strings.Fields(out[strings.Index(out, "link/ether"):])
		s.devMACs[strings.Split(a, "/")[0]] = f[1]
	}
	out := ipCmd(t, "-n", s.relayNS, "-o", "link", "show", s.relayIf)
	f := strings.Fields(out[strings.Index(out, "link/ether"):])
	s.relayMAC, _ = net.ParseMAC(f[1])
	return s
}

// start runs this test binary as helper kind in namespace ns.
func start(t *testing.T, ns, kind string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, helperEnv+"="+kind)...)
	logf, err := os.Create(filepath.Join(t.TempDir(), kind+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s helper's log:\n%s", kind, b)
		}
	})
	return cmd
}

// report is what the relay helper writes, every 100 ms.
type report struct {
	Records []Record
	Stats   Stats
	CPU     time.Duration // the helper's user and system time
	MaxRSS  int64         // its peak resident set, bytes
}

// readReport reads the relay helper's report at path, until ok accepts
// it or the deadline passes.
func waitReport(t *testing.T, path string, d time.Duration, ok func(*report) bool) *report {
	t.Helper()
	deadline := time.Now().Add(d)
	var last *report
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err == nil {
			var r report
			if json.Unmarshal(b, &r) == nil {
				last = &r
				if ok(&r) {
					return &r
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if last != nil {
		b, _ := json.MarshalIndent(last, "", " ")
		t.Fatalf("condition not met in %v; last report:\n%.4000s", d, b)
	}
	t.Fatalf("no report at %s in %v", path, d)
	return nil
}

func TestNetnsDiscovery(t *testing.T) {
	s := newSite(t)
	ready := filepath.Join(t.TempDir(), "ready")
	start(t, s.devNS, "devices", "HD_IF=hdm0", "HD_READY="+ready)
	waitFile(t, ready, 30*time.Second)
	out := filepath.Join(t.TempDir(), "report.json")
	dir := t.TempDir()
	start(t, s.relayNS, "relay", "HD_IF="+s.relayIf, "HD_OUT="+out, "HD_DIR="+dir, "HD_PPS=2000", "HD_MAX=100", "HD_METHODS=arp,onvif,ssdp,mdns")
	r := waitReport(t, out, 60*time.Second, func(r *report) bool {
		return r.Stats.Sweeps >= 1 && len(r.Records) >= 3 && haveFacts(r.Records)
	})
	byIP := map[string]Record{}
	for _, rec := range r.Records {
		for _, ip := range rec.IPs {
			byIP[ip] = rec
		}
	}
	for ip, mac := range s.devMACs {
		rec, ok := byIP[ip]
		if !ok || rec.MAC != mac || rec.Key != mac {
			t.Errorf("device %s (%s): got %+v", ip, mac, rec)
		}
	}
	cam := byIP["10.77.1.5"]
	if cam.ONVIF == nil || cam.ONVIF.Manufacturer != "Halite" || cam.ONVIF.Model != "TestCam-1" || len(cam.ONVIF.XAddrs) != 1 {
		t.Errorf("camera's ONVIF facts: %+v", cam.ONVIF)
	}
	if cam.SSDP == nil || cam.SSDP.Server != "Linux/5.10 UPnP/1.0 TestCam/1.0" {
		t.Errorf("camera's SSDP facts: %+v", cam.SSDP)
	}
	if cam.MDNS == nil || len(cam.MDNS.Names) == 0 || cam.MDNS.Names[0] != "testcam.local" {
		t.Errorf("camera's mDNS facts: %+v", cam.MDNS)
	}
	if got := strings.Join(cam.Methods, ","); got != "arp,mdns,onvif,ssdp" {
		t.Errorf("camera seen by %s", got)
	}
	if len(r.Records) != 3 {
		t.Errorf("%d records, want the 3 devices: %+v", len(r.Records), r.Records)
	}
	sw := r.Stats.LastSweep
	// A /22 less the network, broadcast and the relay's own address.
	if sw.Packets != 1021 {
		t.Errorf("the /22 sweep sent %d requests, want 1021", sw.Packets)
	}
	rate := float64(sw.Packets) / sw.Duration.Seconds()
	t.Logf("FIGURE /22 sweep: %d requests in %v (%.0f packets/s, limit 2000)", sw.Packets, sw.Duration.Round(time.Millisecond), rate)
	if rate > 2000*1.1 {
		t.Errorf("sweep at %.0f packets/s, over packets_per_second 2000", rate)
	}
}

// waitFile waits for a helper to write path.
func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("helper not ready in %v (no %s)", d, path)
}

func haveFacts(rs []Record) bool {
	for _, r := range rs {
		if r.ONVIF != nil && r.SSDP != nil && r.MDNS != nil && r.MAC != "" {
			return true
		}
	}
	return false
}

// TestNetnsFlood floods the relay with spoofed ARP replies (a new MAC and
// address each) and spoofed WS-Discovery answers to its probes: the
// inventory stays within max_devices and the relay's CPU within its
// budget.
func TestNetnsFlood(t *testing.T) {
	s := newSite(t)
	out := filepath.Join(t.TempDir(), "report.json")
	start(t, s.relayNS, "relay", "HD_IF="+s.relayIf, "HD_OUT="+out, "HD_DIR="+t.TempDir(), "HD_PPS=1000", "HD_MAX=500", "HD_METHODS=arp,onvif", "HD_INTERVAL=2")
	waitReport(t, out, 30*time.Second, func(r *report) bool { return r.Stats.Probes > 0 })
	flood := start(t, s.devNS, "flood", "HD_IF="+s.devIf, "HD_DST="+s.relayMAC.String(), "HD_SECONDS=6")
	before := waitReport(t, out, 10*time.Second, func(*report) bool { return true })
	t0 := time.Now()
	if err := flood.Wait(); err != nil {
		t.Fatalf("flood helper: %v", err)
	}
	took := time.Since(t0)
	after := waitReport(t, out, 10*time.Second, func(r *report) bool { return r.Stats.Full > 0 })
	cpu := after.CPU - before.CPU
	t.Logf("FIGURE flood: %v of spoofed ARP replies and WS-Discovery answers: relay decoded %d packets, paused for its budget %d times, refused %d, inventory %d (max 500, %d more refused), relay CPU %v (%.0f%% of a core), peak RSS %.1f MiB, %d events",
		took.Round(time.Millisecond), after.Stats.Handled-before.Stats.Handled, after.Stats.OverRate, after.Stats.Rejected, after.Stats.Devices, after.Stats.Full,
		cpu.Round(time.Millisecond), 100*cpu.Seconds()/took.Seconds(), float64(after.MaxRSS)/(1<<20), after.Stats.Events-before.Stats.Events)
	onvif := 0
	for _, r := range after.Records {
		if r.ONVIF != nil {
			onvif++
		}
	}
	// The test floods both methods: the helper answers each probe of the
	// relay's with spoofed WS-Discovery answers as fast as it can. The
	// ARP flood can fill the inventory before the first probe's answers
	// come, and the relay's budget may drop them all before they are
	// decoded (on a slow machine), so the inventory need not show them;
	// the helper's count shows they were sent.
	log, _ := os.ReadFile(flood.Stdout.(*os.File).Name())
	var wsdSent int
	for _, line := range strings.Split(string(log), "\n") {
		if _, err := fmt.Sscanf(line, "flood: %d spoofed WS-Discovery answers", &wsdSent); err == nil {
			break
		}
	}
	if rate := float64(after.Stats.Handled-before.Stats.Handled) / took.Seconds(); onvif == 0 && rate <= maxHandled*1.2 && wsdSent == 0 {
		t.Errorf("no spoofed WS-Discovery answer was sent (the relay sent no probe the helper saw), none reached the inventory and %.0f packets/s decoded, within one method's budget (%d): the WS-Discovery flood did not flood", rate, maxHandled)
	}
	t.Logf("FIGURE flood: %d spoofed WS-Discovery answers sent, %d in the inventory", wsdSent, onvif)
	if ev := after.Stats.Events - before.Stats.Events; float64(ev) > eventsPerSecond*(took.Seconds()+2) {
		t.Errorf("%d events in %v, over %d a second", ev, took, eventsPerSecond)
	}
	if after.Stats.Devices > 500 || len(after.Records) > 500 {
		t.Errorf("inventory %d records, over max_devices 500", after.Stats.Devices)
	}
	if got := float64(after.Stats.Handled-before.Stats.Handled) / took.Seconds(); got > 2*maxHandled*1.2 {
		t.Errorf("decoded %.0f packets/s, over the two methods' budgets (%d each)", got, maxHandled)
	}
	if cpu > took*3/4 {
		t.Errorf("relay used %v of CPU in %v of flood", cpu, took)
	}
	if rssMax := int64(100 << 20); !raceOn && after.MaxRSS > rssMax {
		t.Errorf("relay peak RSS %d MiB", after.MaxRSS>>20)
	}
}

// helperRelay runs a Discoverer on HD_IF and writes its report to HD_OUT.
func helperRelay() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	atoi := func(k string, def int) int {
		if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
			return n
		}
		return def
	}
	c := config.DefaultDiscovery()
	c.PacketsPerSecond, c.MaxDevices, c.Interval = atoi("HD_PPS", 200), atoi("HD_MAX", 100), atoi("HD_INTERVAL", 600)
	m := func() *config.DiscoveryMethod {
		return &config.DiscoveryMethod{Interfaces: []string{os.Getenv("HD_IF")}, Passive: true, Active: true}
	}
	for _, name := range strings.Split(os.Getenv("HD_METHODS"), ",") {
		switch name {
		case "arp":
			c.ARP = m()
			c.ARP.Subnets = []netip.Prefix{netip.MustParsePrefix("10.77.0.0/22")}
		case "onvif":
			c.ONVIF = m()
		case "ssdp":
			c.SSDP = m()
		case "mdns":
			c.MDNS = m()
		}
	}
	log, _ := zap.NewDevelopment()
	d, err := New(Options{Config: c, Relay: "r1", Dir: os.Getenv("HD_DIR"), Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	out := os.Getenv("HD_OUT")
	t := time.NewTicker(100 * time.Millisecond)
	for {
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			return 0
		case <-t.C:
		}
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		r := report{Records: d.List(), Stats: d.Stats(), MaxRSS: ru.Maxrss * 1024,
			CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
		b, _ := json.Marshal(&r)
		os.WriteFile(out+".tmp", b, 0o600)
		os.Rename(out+".tmp", out)
	}
}

// helperDevices answers WS-Discovery probes, SSDP searches and mDNS
// queries as a camera on HD_IF.
func helperDevices() int {
	ifi, err := net.InterfaceByName(os.Getenv("HD_IF"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	serve := func(group netip.AddrPort, answer func(req []byte) []byte) error {
		u, err := openUDP(int(group.Port()), group.Addr(), []net.Interface{*ifi})
		if err != nil {
			return err
		}
		go func() {
			<-ctx.Done()
			u.c.Close()
		}()
		go func() {
			buf := make([]byte, maxDatagram)
			for {
				n, src, err := u.c.ReadFromUDPAddrPort(buf)
				if err != nil {
					return
				}
				fmt.Fprintf(os.Stderr, "devices: %d bytes from %s on %s\n", n, src, group)
				if a := answer(buf[:n]); a != nil {
					dst := src
					if group == mdnsGroup {
						dst = mdnsGroup
						u.p.SetMulticastInterface(ifi)
					}
					u.c.WriteToUDPAddrPort(a, dst)
				}
			}
		}()
		return nil
	}
	errs := []error{
		serve(wsdGroup, func(req []byte) []byte {
			id := between(string(req), "MessageID>", "<")
			if id == "" {
				return nil
			}
			return []byte(probeMatch(id, "10.77.1.5"))
		}),
		serve(ssdpGroup, func(req []byte) []byte {
			if !strings.HasPrefix(string(req), "M-SEARCH") {
				return nil
			}
			return []byte("HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=1800\r\nLOCATION: http://10.77.1.5:49152/rootDesc.xml\r\nSERVER: Linux/5.10 UPnP/1.0 TestCam/1.0\r\nST: upnp:rootdevice\r\nUSN: uuid:5f9ec1b3-ed59-49fc-0000-000000000001::upnp:rootdevice\r\n\r\n")
		}),
		serve(mdnsGroup, func(req []byte) []byte {
			if len(req) < 3 || req[2]&0x80 != 0 { // a response, not a query
				return nil
			}
			return mdnsAnswer(nopTB{}, "testcam", "TestCam-1", netip.MustParseAddr("10.77.1.5"))
		}),
	}
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	os.WriteFile(os.Getenv("HD_READY"), []byte("ok"), 0o600)
	<-ctx.Done()
	return 0
}

type nopTB struct{ testing.TB }

func (nopTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	j := strings.Index(s, b)
	if j < 0 {
		return ""
	}
	return s[:j]
}

func probeMatch(relatesTo, ip string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><SOAP-ENV:Envelope xmlns:SOAP-ENV="http://www.w3.org/2003/05/soap-envelope" xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery">` +
		`<SOAP-ENV:Header><wsa:MessageID>urn:uuid:` + uuid() + `</wsa:MessageID><wsa:RelatesTo>` + relatesTo + `</wsa:RelatesTo></SOAP-ENV:Header>` +
		`<SOAP-ENV:Body><d:ProbeMatches><d:ProbeMatch><wsa:EndpointReference><wsa:Address>urn:uuid:` + uuid() + `</wsa:Address></wsa:EndpointReference>` +
		`<d:Types>dn:NetworkVideoTransmitter tds:Device</d:Types>` +
		`<d:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/manufacturer/Halite onvif://www.onvif.org/hardware/TestCam-1 onvif://www.onvif.org/name/Test%20Camera</d:Scopes>` +
		`<d:XAddrs>http://` + ip + `/onvif/device_service</d:XAddrs><d:MetadataVersion>1</d:MetadataVersion></d:ProbeMatch></d:ProbeMatches></SOAP-ENV:Body></SOAP-ENV:Envelope>`
}

// helperFlood sends, for HD_SECONDS, spoofed ARP replies to HD_DST (a new
// random MAC and address in each) out of HD_IF, as fast as it can, and
// answers every WS-Discovery probe it hears with a stream of spoofed
// ProbeMatches.
func helperFlood() int {
	ifName := os.Getenv("HD_IF")
	dst, err := net.ParseMAC(os.Getenv("HD_DST"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	secs, _ := strconv.Atoi(os.Getenv("HD_SECONDS"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
	defer cancel()
	ifi, err := net.InterfaceByName(ifName)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The device side needs an address to answer WS-Discovery from.
	exec.Command("ip", "addr", "add", "10.77.3.3/22", "dev", ifName).Run()
	var wsd atomic.Int64 // WS-Discovery answers sent
	go func() {
		u, err := openUDP(int(wsdGroup.Port()), wsdGroup.Addr(), []net.Interface{*ifi})
		if err != nil {
			fmt.Fprintln(os.Stderr, "flood: WS-Discovery:", err)
			return
		}
		_ = ipv4.NewPacketConn(u.c)
		go func() { <-ctx.Done(); u.c.Close() }()
		buf := make([]byte, maxDatagram)
		for {
			n, src, err := u.c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			id := between(string(buf[:n]), "MessageID>", "<")
			go func() {
				for ctx.Err() == nil {
					if _, err := u.c.WriteToUDPAddrPort([]byte(probeMatch(id, fmt.Sprintf("10.77.%d.%d", rand.IntN(4), rand.IntN(256)))), src); err == nil {
						wsd.Add(1)
					}
				}
			}()
		}
	}()
	p, err := openARP(*ifi)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.h.Close()
	sent := 0
	for ctx.Err() == nil {
		mac := net.HardwareAddr{0x00, 0x11, 0x32, byte(rand.IntN(256)), byte(rand.IntN(256)), byte(rand.IntN(256))}
		ip := [4]byte{10, 77, byte(rand.IntN(4)), byte(rand.IntN(256))}
		eth := layers.Ethernet{SrcMAC: mac, DstMAC: dst, EthernetType: layers.EthernetTypeARP}
		arp := layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPReply, SourceHwAddress: mac, SourceProtAddress: ip[:], DstHwAddress: dst, DstProtAddress: []byte{10, 77, 0, 1}}
		buf := gopacket.NewSerializeBuffer()
		gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &eth, &arp)
		if _, err := syscall.Write(p.fd, buf.Bytes()); err == nil {
			sent++
		}
	}
	fmt.Fprintf(os.Stderr, "flood: %d spoofed ARP replies\n", sent)
	fmt.Fprintf(os.Stderr, "flood: %d spoofed WS-Discovery answers\n", wsd.Load())
	return 0
}
