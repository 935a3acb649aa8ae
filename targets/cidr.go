package targets

import (
	"fmt"
	"net/netip"
	"strings"
)

// cidrNode matches an address or a network against the ipv4 or ipv6 grain
// (a list of address strings), as Salt's ipcidr matcher.
type cidrNode struct {
	text   string
	grain  string // "ipv4" or "ipv6"
	addr   netip.Addr
	prefix netip.Prefix // valid when the target is a network
	plain  netip.Addr   // addr without its zone
	zone   string       // addr's zone
}

func newCIDR(text, expr string, pos int) (*cidrNode, error) {
	n := &cidrNode{text: text}
	if a, err := netip.ParseAddr(text); err == nil {
		n.addr = a
	} else {
		p, err := parsePrefix(text)
		if err != nil {
			return nil, &SyntaxError{Expr: expr, Pos: pos, Msg: "expected an IP address or network (10.0.0.0/8, 2001:db8::/32): " + err.Error()}
		}
		n.prefix = p
		n.addr = p.Addr()
	}
	n.plain, n.zone = n.addr.WithZone(""), n.addr.Zone()
	n.grain = "ipv6"
	if n.addr.Is4() {
		n.grain = "ipv4"
	}
	return n, nil
}

// parsePrefix parses a network as Python's ipaddress.ip_network (strict):
// address/length or IPv4 address/netmask, host bits clear.
func parsePrefix(s string) (netip.Prefix, error) {
	addr, mask, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a network", s)
	}
	var p netip.Prefix
	if strings.Contains(mask, ".") {
		a, err := netip.ParseAddr(addr)
		if err != nil || !a.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q: a netmask needs an IPv4 address", s)
		}
		m, err := netip.ParseAddr(mask)
		if err != nil || !m.Is4() {
			return netip.Prefix{}, fmt.Errorf("%q: bad netmask %q", s, mask)
		}
		v := m.As4()
		bits := uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3])
		ones := 0
		for bits&(1<<31) != 0 {
			ones++
			bits <<= 1
		}
		if bits != 0 {
			return netip.Prefix{}, fmt.Errorf("%q: netmask %q is not contiguous", s, mask)
		}
		p = netip.PrefixFrom(a, ones)
	} else {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (did you mean %s?)", s, m)
	}
	return p, nil
}

func (n *cidrNode) match(mn *Minion) bool {
	if mn.Index != nil {
		addrs := mn.Index.addrsOf(n.grain)
		for i := range addrs {
			a := &addrs[i]
			if n.prefix.IsValid() {
				// Prefix.Contains refuses an address with a zone.
				if a.zone.len == 0 && n.prefix.Contains(a.addr()) {
					return true
				}
			} else if a.addr() == n.plain && mn.Index.str(a.zone) == n.zone {
				return true
			}
		}
		return false
	}
	switch v := mn.Grains[n.grain].(type) {
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && n.matchAddr(s) {
				return true
			}
		}
	case []string:
		for _, s := range v {
			if n.matchAddr(s) {
				return true
			}
		}
	case string:
		return n.matchAddr(v)
	}
	return false
}

func (n *cidrNode) matchAddr(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false
	}
	if n.prefix.IsValid() {
		return n.prefix.Contains(a)
	}
	return a == n.addr
}

func (n *cidrNode) weight() int { return 1 }

func (n *cidrNode) format(b *strings.Builder) {
	b.WriteString("S@")
	b.WriteString(n.text)
}
