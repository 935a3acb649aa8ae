package discovery

import (
	"bytes"
	"context"
	"encoding/xml"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/halite-fleet/halite/config"
)

// wsdGroup is WS-Discovery's multicast group and port.
var wsdGroup = netip.MustParseAddrPort("239.255.255.250:3702")

// wsdProbeTypes are the types probed for: ONVIF's video transmitters
// (cameras, encoders) and every ONVIF device (recorders, I/O boxes).
var wsdProbeTypes = []string{"dn:NetworkVideoTransmitter", "tds:Device"}

// wsdWindow is how long the answers to a probe are taken.
const wsdWindow = 10 * time.Second

// maxMatches bounds the ProbeMatch elements read from one answer.
const maxMatches = 4

const wsdProbe = `<?xml version="1.0" encoding="UTF-8"?>
<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:a="http://schemas.xmlsoap.org/ws/2004/08/addressing" xmlns:d="http://schemas.xmlsoap.org/ws/2005/04/discovery" xmlns:dn="http://www.onvif.org/ver10/network/wsdl" xmlns:tds="http://www.onvif.org/ver10/device/wsdl">
<s:Header><a:Action s:mustUnderstand="1">http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe</a:Action><a:MessageID>urn:uuid:{ID}</a:MessageID><a:ReplyTo><a:Address>http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous</a:Address></a:ReplyTo><a:To s:mustUnderstand="1">urn:schemas-xmlsoap-org:ws:2005:04:discovery</a:To></s:Header>
<s:Body><d:Probe><d:Types>{TYPES}</d:Types></d:Probe></s:Body>
</s:Envelope>`

// probeIDs are the MessageIDs of the recent probes: an answer must relate
// to one (an unsolicited or stale "answer" is refused unread).
type probeIDs struct {
	mu  sync.Mutex
	ids map[string]time.Time
}

func (p *probeIDs) add(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ids == nil {
		p.ids = map[string]time.Time{}
	}
	now := time.Now()
	for k, t := range p.ids {
		if now.Sub(t) > wsdWindow {
			delete(p.ids, k)
		}
	}
	p.ids[id] = now
}

func (p *probeIDs) ok(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.ids[id]
	return ok && time.Since(t) <= wsdWindow
}

// runWSD probes for ONVIF devices every interval and records the answers.
func (d *Discoverer) runWSD(ctx context.Context, m *config.DiscoveryMethod) error {
	ifs, err := interfaces(m.Interfaces)
	if err != nil {
		return err
	}
	u, err := openUDP(0, netip.Addr{}, ifs)
	if err != nil {
		return err
	}
	defer u.c.Close()
	var ids probeIDs
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.readUDP(ctx, u, func(src netip.Addr, b []byte) {
			s, ok := parseProbeMatches(b, ids.ok)
			if !ok {
				d.rejected.Add(1)
				return
			}
			s.ip = src
			d.see(s)
		})
	}()
	d.every(ctx, func() {
		for _, t := range wsdProbeTypes {
			id := uuid()
			ids.add("urn:uuid:" + id)
			msg := strings.NewReplacer("{ID}", id, "{TYPES}", t).Replace(wsdProbe)
			if err := d.send(ctx, u, wsdGroup, []byte(msg)); err != nil {
				d.log.Debug("discovery: WS-Discovery probe not sent")
			}
		}
	})
	u.c.Close()
	<-done
	return nil
}

// wsdEnvelope is what is read of a ProbeMatches message (local names: a
// device may use any namespace prefixes).
type wsdEnvelope struct {
	Header struct {
		RelatesTo string `xml:"RelatesTo"`
	} `xml:"Header"`
	Body struct {
		ProbeMatches struct {
			Match []wsdMatch `xml:"ProbeMatch"`
		} `xml:"ProbeMatches"`
	} `xml:"Body"`
}

type wsdMatch struct {
	Endpoint string `xml:"EndpointReference>Address"`
	Types    string `xml:"Types"`
	Scopes   string `xml:"Scopes"`
	XAddrs   string `xml:"XAddrs"`
}

// parseProbeMatches reads a WS-Discovery ProbeMatches answer; related
// tells whether its RelatesTo is one of the relay's probes.
func parseProbeMatches(b []byte, related func(string) bool) (sighting, bool) {
	var env wsdEnvelope
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	dec.Entity = nil
	dec.CharsetReader = nil
	if err := dec.Decode(&env); err != nil {
		return sighting{}, false
	}
	if !related(strings.TrimSpace(env.Header.RelatesTo)) || len(env.Body.ProbeMatches.Match) == 0 {
		return sighting{}, false
	}
	ms := env.Body.ProbeMatches.Match
	if len(ms) > maxMatches {
		ms = ms[:maxMatches]
	}
	o := &ONVIF{}
	for _, m := range ms {
		if o.Endpoint == "" {
			o.Endpoint = cut(strings.TrimSpace(m.Endpoint))
		}
		o.XAddrs, _ = addList(o.XAddrs, cutList(strings.Fields(m.XAddrs), maxList))
		o.Types, _ = addList(o.Types, cutList(strings.Fields(m.Types), maxList))
		o.Scopes, _ = addList(o.Scopes, cutList(strings.Fields(m.Scopes), maxList))
	}
	for _, s := range o.Scopes {
		rest, ok := strings.CutPrefix(s, "onvif://www.onvif.org/")
		if !ok {
			continue
		}
		kind, val, _ := strings.Cut(rest, "/")
		if v, err := url.PathUnescape(val); err == nil {
			val = v
		}
		val = cut(val)
		switch strings.ToLower(kind) {
		case "name":
			o.Name = val
		case "hardware":
			o.Hardware = val
		case "manufacturer", "mfr", "brand":
			o.Manufacturer = val
		case "model":
			o.Model = val
		case "location":
			if o.Location == "" {
				o.Location = val
			}
		}
	}
	if o.Model == "" {
		o.Model = o.Hardware
	}
	return sighting{method: "onvif", onvif: o}, true
}
