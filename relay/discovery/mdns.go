package discovery

import (
	"context"
	"net/netip"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/halite-fleet/halite/config"
)

// mdnsGroup is multicast DNS's group and port.
var mdnsGroup = netip.MustParseAddrPort("224.0.0.251:5353")

// mdnsServices are asked for by name, besides the DNS-SD list of every
// service: what cameras, recorders and network gear announce.
var mdnsServices = []string{
	"_services._dns-sd._udp.local.", "_axis-video._tcp.local.", "_rtsp._tcp.local.", "_http._tcp.local.",
	"_onvif._tcp.local.", "_ssh._tcp.local.", "_workstation._tcp.local.", "_device-info._tcp.local.",
}

// maxMDNSRecords bounds the resource records read from one message.
const maxMDNSRecords = 64

// mdnsQuery is the query sent every interval: a PTR question for each of
// mdnsServices.
func mdnsQuery() []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{})
	b.EnableCompression()
	_ = b.StartQuestions()
	for _, s := range mdnsServices {
		_ = b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(s), Type: dnsmessage.TypePTR, Class: dnsmessage.ClassINET})
	}
	msg, err := b.Finish()
	if err != nil {
		panic("discovery: mDNS query: " + err.Error()) // fixed names: cannot fail
	}
	return msg
}

// runMDNS queries every interval and records every answer heard on
// 224.0.0.251:5353 (the answers to the relay's queries and others').
func (d *Discoverer) runMDNS(ctx context.Context, m *config.DiscoveryMethod) error {
	ifs, err := interfaces(m.Interfaces)
	if err != nil {
		return err
	}
	u, err := openUDP(int(mdnsGroup.Port()), mdnsGroup.Addr(), ifs)
	if err != nil {
		return err
	}
	defer u.c.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.readUDP(ctx, u, func(src netip.Addr, b []byte) {
			s, ok := parseMDNS(b)
			if !ok {
				return // a query, or nothing of use: not an error
			}
			s.ip = src
			d.see(s)
		})
	}()
	q := mdnsQuery()
	d.every(ctx, func() {
		if err := d.send(ctx, u, mdnsGroup, q); err != nil {
			d.log.Debug("discovery: mDNS query not sent", zap.Error(err))
		}
	})
	u.c.Close()
	<-done
	return nil
}

// parseMDNS reads an mDNS response: PTR records name services and their
// instances, SRV and A records the device's host names, TXT its
// properties.
func parseMDNS(b []byte) (sighting, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil || !h.Response {
		return sighting{}, false
	}
	if err := p.SkipAllQuestions(); err != nil {
		return sighting{}, false
	}
	m := &MDNS{}
	add := func(l *[]string, s string) { *l, _ = addList(*l, []string{cut(strings.TrimSuffix(s, "."))}) }
	n := 0
	sections := []struct {
		header func() (dnsmessage.ResourceHeader, error)
		skip   func() error
	}{{p.AnswerHeader, p.SkipAnswer}, {p.AuthorityHeader, p.SkipAuthority}, {p.AdditionalHeader, p.SkipAdditional}}
	for _, sec := range sections {
		for n < maxMDNSRecords {
			h, err := sec.header()
			if err == dnsmessage.ErrSectionDone {
				break
			}
			if err != nil {
				return sighting{}, false
			}
			n++
			name := h.Name.String()
			var rerr error
			switch h.Type {
			case dnsmessage.TypePTR:
				var r dnsmessage.PTRResource
				if r, rerr = p.PTRResource(); rerr == nil {
					if strings.EqualFold(name, "_services._dns-sd._udp.local.") {
						add(&m.Services, r.PTR.String())
					} else {
						add(&m.Services, name)
						add(&m.Instances, r.PTR.String())
					}
				}
			case dnsmessage.TypeSRV:
				var r dnsmessage.SRVResource
				if r, rerr = p.SRVResource(); rerr == nil {
					add(&m.Instances, name)
					add(&m.Names, r.Target.String())
				}
			case dnsmessage.TypeA:
				if _, rerr = p.AResource(); rerr == nil {
					add(&m.Names, name)
				}
			case dnsmessage.TypeTXT:
				var r dnsmessage.TXTResource
				if r, rerr = p.TXTResource(); rerr == nil {
					for i, t := range r.TXT {
						if t != "" && i < maxList {
							add(&m.TXT, t)
						}
					}
				}
			default:
				rerr = sec.skip()
			}
			if rerr != nil {
				return sighting{}, false
			}
		}
		if n >= maxMDNSRecords {
			break
		}
	}
	if len(m.Names) == 0 && len(m.Services) == 0 && len(m.Instances) == 0 {
		return sighting{}, false
	}
	return sighting{method: "mdns", mdns: m}, true
}
