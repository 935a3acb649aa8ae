package discovery

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/gopacket/pcapgo"
	"go.uber.org/zap"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/halite-fleet/halite/config"
)

// A Hikvision-style ProbeMatch (prefixes as such cameras send them).
const hikMatch = `<?xml version="1.0" encoding="UTF-8"?>
<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope" xmlns:wsadis="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:dn="http://www.onvif.org/ver10/network/wsdl">
<env:Header><wsadis:MessageID>urn:uuid:1</wsadis:MessageID><wsadis:RelatesTo>urn:uuid:%s</wsadis:RelatesTo></env:Header>
<env:Body><d:ProbeMatches><d:ProbeMatch>
<wsadis:EndpointReference><wsadis:Address>urn:uuid:4419a1ec-7b1a-11b3-8186-c056e3a4f1ab</wsadis:Address></wsadis:EndpointReference>
<d:Types>dn:NetworkVideoTransmitter tds:Device</d:Types>
<d:Scopes>onvif://www.onvif.org/type/video_encoder onvif://www.onvif.org/Profile/Streaming onvif://www.onvif.org/hardware/DS-2CD2143G0-I onvif://www.onvif.org/name/HIKVISION%%20DS-2CD2143G0-I onvif://www.onvif.org/location/city/hangzhou onvif://www.onvif.org/manufacturer/Hikvision</d:Scopes>
<d:XAddrs>http://10.9.0.20/onvif/device_service http://[fe80::1]/onvif/device_service</d:XAddrs>
<d:MetadataVersion>10</d:MetadataVersion>
</d:ProbeMatch></d:ProbeMatches></env:Body></env:Envelope>`

func TestParseProbeMatches(t *testing.T) {
	related := func(id string) bool { return id == "urn:uuid:abc" }
	s, ok := parseProbeMatches(fmt.Appendf(nil, hikMatch, "abc"), related)
	if !ok {
		t.Fatal("ProbeMatches refused")
	}
	want := &ONVIF{Endpoint: "urn:uuid:4419a1ec-7b1a-11b3-8186-c056e3a4f1ab",
		XAddrs: []string{"http://10.9.0.20/onvif/device_service", "http://[fe80::1]/onvif/device_service"},
		Types:  []string{"dn:NetworkVideoTransmitter", "tds:Device"},
		Scopes: []string{"onvif://www.onvif.org/Profile/Streaming", "onvif://www.onvif.org/hardware/DS-2CD2143G0-I", "onvif://www.onvif.org/location/city/hangzhou",
			"onvif://www.onvif.org/manufacturer/Hikvision", "onvif://www.onvif.org/name/HIKVISION%20DS-2CD2143G0-I", "onvif://www.onvif.org/type/video_encoder"},
		Manufacturer: "Hikvision", Model: "DS-2CD2143G0-I", Hardware: "DS-2CD2143G0-I", Name: "HIKVISION DS-2CD2143G0-I", Location: "city/hangzhou"}
	if d := cmp.Diff(want, s.onvif); d != "" {
		t.Errorf("ONVIF facts (-want +got):\n%s", d)
	}
	if _, ok := parseProbeMatches(fmt.Appendf(nil, hikMatch, "other"), related); ok {
		t.Error("an answer to no probe of the relay's was taken")
	}
	for _, bad := range []string{"", "<x", "<Envelope><Body/></Envelope>", strings.Repeat("<a>", 5000)} {
		if _, ok := parseProbeMatches([]byte(bad), related); ok {
			t.Errorf("%.20q taken", bad)
		}
	}
	// Many matches, long scopes: bounded.
	var b strings.Builder
	b.WriteString(`<Envelope><Header><RelatesTo>urn:uuid:abc</RelatesTo></Header><Body><ProbeMatches>`)
	for i := range 50 {
		fmt.Fprintf(&b, "<ProbeMatch><Scopes>%s</Scopes><XAddrs>http://x/%d</XAddrs></ProbeMatch>", strings.Repeat("onvif://www.onvif.org/name/"+strings.Repeat("n", 400)+" ", 30), i)
	}
	b.WriteString(`</ProbeMatches></Body></Envelope>`)
	s, ok = parseProbeMatches([]byte(b.String()), related)
	if !ok {
		t.Fatal("large answer refused")
	}
	if len(s.onvif.XAddrs) != maxMatches || len(s.onvif.Scopes) > maxList || len(s.onvif.Name) > maxString {
		t.Errorf("bounds: %d xaddrs, %d scopes, name %d bytes", len(s.onvif.XAddrs), len(s.onvif.Scopes), len(s.onvif.Name))
	}
}

func TestParseSSDP(t *testing.T) {
	s, ok := parseSSDP([]byte("HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=1800\r\nLOCATION: http://10.9.0.21:49152/rootDesc.xml\r\nSERVER: Linux/3.10 UPnP/1.0 IpCam/1.0\r\nST: upnp:rootdevice\r\nUSN: uuid:abcd::upnp:rootdevice\r\n\r\n"))
	want := &SSDP{Server: "Linux/3.10 UPnP/1.0 IpCam/1.0", Location: "http://10.9.0.21:49152/rootDesc.xml", USN: []string{"uuid:abcd::upnp:rootdevice"}, Types: []string{"upnp:rootdevice"}}
	if !ok || cmp.Diff(want, s.ssdp) != "" {
		t.Errorf("answer: ok %v, (-want +got):\n%s", ok, cmp.Diff(want, s.ssdp))
	}
	if _, ok := parseSSDP([]byte("NOTIFY * HTTP/1.1\r\nNT: upnp:rootdevice\r\nNTS: ssdp:alive\r\nUSN: uuid:x\r\n\r\n")); !ok {
		t.Error("NOTIFY refused")
	}
	if _, ok := parseSSDP([]byte(ssdpSearch)); ok {
		t.Error("another host's M-SEARCH taken as a device's facts")
	}
}

func TestParseMDNS(t *testing.T) {
	resp := mdnsAnswer(t, "cam-7", "AXIS M3045", netip.MustParseAddr("10.9.0.22"))
	s, ok := parseMDNS(resp)
	if !ok {
		t.Fatal("answer refused")
	}
	want := &MDNS{Names: []string{"cam-7.local"}, Services: []string{"_axis-video._tcp.local"}, Instances: []string{"AXIS M3045._axis-video._tcp.local"}, TXT: []string{"macaddress=ACCC8E000001"}}
	if d := cmp.Diff(want, s.mdns); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, ok := parseMDNS(mdnsQuery()); ok {
		t.Error("a query taken as an answer")
	}
	if _, ok := parseMDNS(resp[:len(resp)-3]); ok {
		t.Error("a truncated answer taken")
	}
}

func TestOUI(t *testing.T) {
	o := builtinOUIs()
	if len(o.prefix) < 1000 {
		t.Fatalf("built-in table has %d OUIs", len(o.prefix))
	}
	for mac, want := range map[string]string{"c0:56:e3:00:00:01": "Hangzhou Hikvision", "ac:cc:8e:00:00:01": "Axis", "02:00:00:00:00:01": ""} {
		m, _ := net.ParseMAC(mac)
		if got := o.lookup(m); !strings.Contains(got, want) || (want == "" && got != "") {
			t.Errorf("vendor of %s: got %q, want %q", mac, got, want)
		}
	}
}

// TestHandleFD pins what handleFD reads from pcapgo's EthernetHandle.
func TestHandleFD(t *testing.T) {
	var h pcapgo.EthernetHandle
	if _, err := handleFD(&h); err != nil {
		t.Fatal(err)
	}
}

func TestInventory(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	inv := newInventory(3)
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{0xc0, 0x56, 0xe3, 0, 0, byte(i)} }
	ip := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 9, 0, byte(i)}) }
	// Heard over UDP first, then its MAC: one record, under its MAC.
	inv.see(sighting{ip: ip(1), method: "onvif", onvif: &ONVIF{Model: "X"}}, now)
	ev := inv.tick(now.Add(-time.Hour), nil, 10)
	if len(ev) != 1 || ev[0].what != "new" || ev[0].data["key"] != "ip:10.9.0.1" {
		t.Fatalf("events: %v", ev)
	}
	inv.see(sighting{mac: mac(1), ip: ip(1), method: "arp"}, now)
	ev = inv.tick(now.Add(-time.Hour), nil, 10)
	if len(ev) != 2 || ev[0].what != "gone" || ev[1].what != "new" || ev[1].data["mac"] != "c0:56:e3:00:00:01" {
		t.Fatalf("identified: events %v", ev)
	}
	r := inv.list()
	if len(r) != 1 || r[0].ONVIF == nil || !strings.Contains(r[0].Vendor, "Hikvision") || strings.Join(r[0].Methods, ",") != "arp,onvif" {
		t.Fatalf("records: %+v", r)
	}
	// The same again: nothing to tell. Managed: changed.
	inv.see(sighting{mac: mac(1), ip: ip(1), method: "arp"}, now)
	if ev := inv.tick(now.Add(-time.Hour), map[netip.Addr]string{ip(1): "cam1"}, 10); len(ev) != 1 || ev[0].what != "changed" || ev[0].data["id"] != "cam1" {
		t.Fatalf("managed: events %v", ev)
	}
	// Full: the fourth device is counted, not kept.
	for i := 2; i <= 4; i++ {
		inv.see(sighting{mac: mac(i), ip: ip(i), method: "arp"}, now)
	}
	if n, full := inv.stats(); n != 3 || full != 1 {
		t.Fatalf("inventory %d, full %d; want 3, 1", n, full)
	}
	// Events are bounded a tick.
	if ev := inv.tick(now.Add(-time.Hour), nil, 1); len(ev) != 1 {
		t.Fatalf("%d events, want 1", len(ev))
	}
	// Saved and read back.
	path := filepath.Join(t.TempDir(), "inv.cbor")
	if err := inv.save(path); err != nil {
		t.Fatal(err)
	}
	back := newInventory(2)
	if err := back.load(path); err != nil {
		t.Fatal(err)
	}
	if n, _ := back.stats(); n != 2 {
		t.Errorf("read back %d records into an inventory of 2", n)
	}
	// Unseen past the cutoff: gone.
	ev = inv.tick(now.Add(time.Second), nil, 100)
	gone := 0
	for _, e := range ev {
		if e.what == "gone" {
			gone++
		}
	}
	// Two were announced; the third never was, and goes unannounced.
	if n, _ := inv.stats(); n != 0 || gone != 2 {
		t.Errorf("after gone_after: %d records, %d gone events (%v)", n, gone, ev)
	}
}

// mdnsAnswer builds what an Axis camera answers to a PTR query.
func mdnsAnswer(t testing.TB, host, instance string, ip netip.Addr) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{Response: true, Authoritative: true})
	b.EnableCompression()
	svc := dnsmessage.MustNewName("_axis-video._tcp.local.")
	inst := dnsmessage.MustNewName(instance + "._axis-video._tcp.local.")
	hn := dnsmessage.MustNewName(host + ".local.")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.StartAnswers())
	hdr := func(n dnsmessage.Name, ty dnsmessage.Type) dnsmessage.ResourceHeader {
		return dnsmessage.ResourceHeader{Name: n, Type: ty, Class: dnsmessage.ClassINET, TTL: 120}
	}
	must(b.PTRResource(hdr(svc, dnsmessage.TypePTR), dnsmessage.PTRResource{PTR: inst}))
	must(b.StartAdditionals())
	must(b.SRVResource(hdr(inst, dnsmessage.TypeSRV), dnsmessage.SRVResource{Target: hn, Port: 80}))
	must(b.TXTResource(hdr(inst, dnsmessage.TypeTXT), dnsmessage.TXTResource{TXT: []string{"macaddress=ACCC8E000001"}}))
	must(b.AResource(hdr(hn, dnsmessage.TypeA), dnsmessage.AResource{A: ip.As4()}))
	msg, err := b.Finish()
	must(err)
	return msg
}

// TestEvents: the events go under the relay's tag, at most
// eventsPerSecond a tick.
func TestEvents(t *testing.T) {
	c := &config.Discovery{Interval: 60, PacketsPerSecond: 10, MaxDevices: 1000, GoneAfter: 60, SSDP: &config.DiscoveryMethod{}}
	var tags []string
	d, err := New(Options{Config: c, Relay: "site-1", Log: zap.NewNop(), Event: func(tag string, data map[string]any) error {
		tags = append(tags, tag)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		d.inv.see(sighting{ip: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), method: "ssdp", ssdp: &SSDP{Server: "x"}}, time.Now())
	}
	d.tick(time.Now())
	if len(tags) != eventsPerSecond || tags[0] != "halite/relay/site-1/discovery/new" {
		t.Fatalf("first tick: %d events (%.1q), want %d", len(tags), tags[:min(len(tags), 1)], eventsPerSecond)
	}
	d.tick(time.Now())
	if len(tags) != 150 {
		t.Fatalf("after two ticks: %d events, want 150", len(tags))
	}
}
