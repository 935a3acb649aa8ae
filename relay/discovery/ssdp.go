package discovery

import (
	"context"
	"net/netip"
	"strings"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
)

// ssdpGroup is SSDP's multicast group and port.
var ssdpGroup = netip.MustParseAddrPort("239.255.255.250:1900")

const ssdpSearch = "M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nMX: 2\r\nST: ssdp:all\r\n\r\n"

// maxSSDPHeaders bounds the header lines read from one message.
const maxSSDPHeaders = 32

// runSSDP searches every interval from an ephemeral port (answers come
// back to it) and listens to the NOTIFY announcements on 1900.
func (d *Discoverer) runSSDP(ctx context.Context, m *config.DiscoveryMethod) error {
	ifs, err := interfaces(m.Interfaces)
	if err != nil {
		return err
	}
	search, err := openUDP(0, netip.Addr{}, ifs)
	if err != nil {
		return err
	}
	defer search.c.Close()
	handle := func(src netip.Addr, b []byte) {
		s, ok := parseSSDP(b)
		if !ok {
			d.rejected.Add(1)
			return
		}
		s.ip = src
		d.see(s)
	}
	var readers []chan struct{}
	start := func(u *udpPort) {
		done := make(chan struct{})
		readers = append(readers, done)
		go func() {
			defer close(done)
			d.readUDP(ctx, u, handle)
		}()
	}
	start(search)
	if notify, err := openUDP(int(ssdpGroup.Port()), ssdpGroup.Addr(), ifs); err != nil {
		d.log.Warn("discovery: SSDP announcements not heard (searching only)", zap.Error(err))
	} else {
		defer notify.c.Close()
		start(notify)
	}
	d.every(ctx, func() {
		if err := d.send(ctx, search, ssdpGroup, []byte(ssdpSearch)); err != nil {
			d.log.Debug("discovery: SSDP search not sent", zap.Error(err))
		}
	})
	for _, r := range readers {
		<-r
	}
	return nil
}

// parseSSDP reads an M-SEARCH answer ("HTTP/1.1 200 OK") or a NOTIFY
// announcement; searches (other hosts' M-SEARCH) are not devices' facts.
func parseSSDP(b []byte) (sighting, bool) {
	lines := strings.Split(string(b), "\n")
	if len(lines) < 2 {
		return sighting{}, false
	}
	first := strings.TrimSpace(lines[0])
	if !strings.HasPrefix(first, "HTTP/1.1 200") && !strings.HasPrefix(first, "NOTIFY * HTTP/1.1") {
		return sighting{}, false
	}
	s := &SSDP{}
	for i, l := range lines[1:] {
		if i >= maxSSDPHeaders {
			break
		}
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		v = cut(strings.TrimSpace(v))
		switch strings.ToUpper(strings.TrimSpace(k)) {
		case "SERVER":
			s.Server = v
		case "LOCATION":
			s.Location = v
		case "USN":
			s.USN = []string{v}
		case "ST", "NT":
			s.Types = []string{v}
		}
	}
	if s.Server == "" && s.Location == "" && len(s.USN) == 0 {
		return sighting{}, false
	}
	return sighting{method: "ssdp", ssdp: s}, true
}
