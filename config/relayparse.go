// The relay: section's parser is built where the relay is (see
// cmd/halite-agent/relay.go): the 32-bit ARM and MIPS agents have no relay
// unless built with -tags relay, and no room for what they cannot use.

//go:build relay || !(arm || mips || mipsle)

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"go.yaml.in/yaml/v3"
)

// relayOptions is the relay: section's option table.
func relayOptions() map[string]*option[Relay] {
	type R = Relay
	return table([]option[R]{
		optStr("interface", func(r *R) *string { return &r.Interface }, "address to listen on for devices"),
		optPort("port", func(r *R) *int { return &r.Port }, "UDP port for devices"),
		optRange("max_devices", 1, MaxRelayDevices, func(r *R) *int { return &r.MaxDevices }, "devices served at once"),
		optCount("spool_max", func(r *R) *int { return &r.SpoolMax }, "bytes of returns and events held while the master is away (cachedir/relay-spool)"),
		optRange("event_rate", 1, 1<<20, func(r *R) *int { return &r.EventRate }, "returns and events a second per device"),
		optRange("event_burst", 1, 1<<20, func(r *R) *int { return &r.EventBurst }, "burst of returns and events per device"),
		optCount("heartbeat", func(r *R) *int { return &r.Heartbeat }, "seconds between heartbeat events; 0: off"),
		optRange("device_timeout", 5, 600, func(r *R) *int { return &r.DeviceTimeout }, "seconds a silent device is kept; devices send a keep-alive after half of it"),
		optRange("gc_percent", 10, 400, func(r *R) *int { return &r.GCPercent }, "the Go collector's GOGC while a relay runs (GOGC in the environment wins): lower holds less memory per device for more CPU"),
		optRange("admit", 1, 1<<20, func(r *R) *int { return &r.Admit }, "devices let in a second (handshakes and upstream sessions); at most admit/2 (at least 16) handshakes in progress"),
		optRange("batch_max", MinRelayBatch, MaxRelayBatch, func(r *R) *int { return &r.BatchMax }, "bytes of one batch of returns and events to the master"),
		optRange("batch_delay", 0, MaxRelayBatchDelay, func(r *R) *int { return &r.BatchDelay }, "milliseconds a batch waits for more after its first item"),
		optStr("chunk_cache_dir", func(r *R) *string { return &r.ChunkCacheDir }, "directory of the cache of file chunks by hash (default cachedir/relay-chunks)"),
		optCount("chunk_cache_bytes", func(r *R) *int { return &r.ChunkCacheBytes }, "bytes of file chunks cached on disk, least recently used dropped first; 0: off"),
		optFunc("discovery", "discovery mapping (see below)", func(r *R, v value) error { return v.discovery(&r.Discovery) }, func(r *R) any { return r.Discovery },
			"inventories the site network: the discovery options below").with("(off)"),
		optFunc("proxy", "list of proxy minion mappings (see below)", func(r *R, v value) error { return v.proxies(&r.Proxies) }, func(r *R) any { return len(r.Proxies) },
			"proxy minions the relay runs for devices that cannot run the agent: the proxy options below").with("(none)"),
		optRange("proxy_dynamic_max", 0, MaxProxies, func(r *R) *int { return &r.ProxyDynamicMax }, "run-time proxy minions the master may add (runner proxy.add, for devices in the relay's discovery inventory); 0: none"),
	})
}

// RelayOptions documents the relay: section's options, in name order.
func RelayOptions() []OptionDoc { return docs(relayOptions(), DefaultRelay()) }

// relay parses the relay: mapping; `relay: {}` is a relay with every
// default.
func (v value) relay(dst **Relay) error {
	n := v.node()
	r := DefaultRelay()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of relay options, got %s", describe(n))
	}
	opts := relayOptions()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		o, ok := opts[k.Value]
		if k.Kind != yaml.ScalarNode || !ok {
			names := make([]string, 0, len(opts))
			for _, d := range docs(opts, r) {
				names = append(names, d.Name)
			}
			return &atLine{k.Line, fmt.Sprintf("unknown relay option %s (known: %s)", describe(k), strings.Join(names, ", "))}
		}
		if isNull(val) {
			continue
		}
		if err := o.set(r, value{n: val}); err != nil {
			return inner(k, err)
		}
	}
	*dst = r
	return nil
}

// inner places the error of key k's value at the line it names (a line
// inside the value), else at k's.
func inner(k *yaml.Node, err error) *atLine {
	var al *atLine
	if errors.As(err, &al) {
		return &atLine{al.line, k.Value + ": " + al.msg}
	}
	return &atLine{k.Line, fmt.Sprintf("%s: %v", k.Value, err)}
}

// discoveryMethods are the discovery methods, in the order they are
// documented.
var discoveryMethods = []string{"arp", "onvif", "mdns", "ssdp"}

// discoveryOptions is the discovery: section's option table.
func discoveryOptions() map[string]*option[Discovery] {
	type D = Discovery
	return table([]option[D]{
		optRange("interval", 10, 7*86400, func(d *D) *int { return &d.Interval }, "seconds between two active rounds (ARP sweep, WS-Discovery, mDNS and SSDP queries)"),
		optRange("packets_per_second", 1, 100000, func(d *D) *int { return &d.PacketsPerSecond }, "probes sent a second, at most (a /16 sweep is 65,536)"),
		optRange("max_devices", 1, 1<<16, func(d *D) *int { return &d.MaxDevices }, "devices kept in the inventory; more are counted and dropped"),
		optRange("gone_after", 60, 366*86400, func(d *D) *int { return &d.GoneAfter }, "seconds unseen before a device is forgotten (discovery/gone)"),
		optFunc("methods", "list of methods, or mapping of method to its options", func(d *D, v value) error { return v.discoveryMethods(d) }, func(d *D) any { return d.Methods() },
			"arp (interfaces, subnets, passive, active), onvif, mdns, ssdp (interfaces)"),
	})
}

// DiscoveryOptions documents the relay's discovery: section's options, in
// name order.
func DiscoveryOptions() []OptionDoc { return docs(discoveryOptions(), DefaultDiscovery()) }

// discovery parses the discovery: mapping.
func (v value) discovery(dst **Discovery) error {
	n := v.node()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of discovery options, got %s", describe(n))
	}
	d := DefaultDiscovery()
	opts := discoveryOptions()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		o, ok := opts[k.Value]
		if k.Kind != yaml.ScalarNode || !ok {
			return &atLine{k.Line, fmt.Sprintf("unknown discovery option %s (known: gone_after, interval, max_devices, methods, packets_per_second)", describe(k))}
		}
		if isNull(val) {
			continue
		}
		if err := o.set(d, value{n: val}); err != nil {
			return inner(k, err)
		}
	}
	if d.ARP == nil && d.ONVIF == nil && d.MDNS == nil && d.SSDP == nil {
		return &atLine{n.Line, "no method given (methods: arp, onvif, mdns, ssdp)"}
	}
	*dst = d
	return nil
}

// discoveryMethods sets d's methods from a list of names or a mapping of
// name to options (a null or empty mapping: the defaults; false: off).
func (v value) discoveryMethods(d *Discovery) error {
	n := v.node()
	slot := func(k *yaml.Node) (**DiscoveryMethod, error) {
		switch k.Value {
		case "arp":
			return &d.ARP, nil
		case "onvif":
			return &d.ONVIF, nil
		case "mdns":
			return &d.MDNS, nil
		case "ssdp":
			return &d.SSDP, nil
		}
		return nil, &atLine{k.Line, fmt.Sprintf("unknown discovery method %s (known: %s)", describe(k), strings.Join(discoveryMethods, ", "))}
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, e := range n.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode {
				return &atLine{e.Line, fmt.Sprintf("expected a method name, got %s", describe(e))}
			}
			p, err := slot(e)
			if err != nil {
				return err
			}
			*p = &DiscoveryMethod{Passive: true, Active: true}
		}
		return nil
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := resolve(n.Content[i]), resolve(n.Content[i+1])
			p, err := slot(k)
			if err != nil {
				return err
			}
			m := &DiscoveryMethod{Passive: true, Active: true}
			if val.Kind == yaml.ScalarNode && !isNull(val) {
				var on bool
				if err := (value{n: val}).bool(&on); err != nil {
					return &atLine{val.Line, fmt.Sprintf("%s: expected a mapping of options, true or false, got %s", k.Value, describe(val))}
				}
				if !on {
					*p = nil
					continue
				}
			} else if !isNull(val) {
				if err := (value{n: val}).discoveryMethod(k.Value, m); err != nil {
					return inner(k, err)
				}
			}
			*p = m
		}
		return nil
	}
	return fmt.Errorf("expected a list of methods or a mapping of method to options, got %s", describe(n))
}

// discoveryMethod parses one method's options.
func (v value) discoveryMethod(name string, m *DiscoveryMethod) error {
	n := v.node()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of options, got %s", describe(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		var err error
		switch {
		case k.Value == "interfaces":
			err = value{n: val}.strList(&m.Interfaces, true)
		case k.Value == "subnets" && name == "arp":
			err = value{n: val}.subnets(&m.Subnets)
		case k.Value == "passive" && name == "arp":
			err = value{n: val}.bool(&m.Passive)
		case k.Value == "active" && name == "arp":
			err = value{n: val}.bool(&m.Active)
		default:
			known := "interfaces"
			if name == "arp" {
				known = "active, interfaces, passive, subnets"
			}
			return &atLine{k.Line, fmt.Sprintf("unknown %s option %s (known: %s)", name, describe(k), known)}
		}
		if err != nil {
			return inner(k, err)
		}
	}
	return nil
}

// subnets parses a list of IPv4 networks of at most a /16 each.
func (v value) subnets(dst *[]netip.Prefix) error {
	n := v.node()
	var items []*yaml.Node
	switch n.Kind {
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	case yaml.SequenceNode:
		items = n.Content
	default:
		return fmt.Errorf("expected an IPv4 network or a list of them, got %s", describe(n))
	}
	var out []netip.Prefix
	for _, e := range items {
		e = resolve(e)
		if e.Kind != yaml.ScalarNode {
			return &atLine{e.Line, fmt.Sprintf("expected an IPv4 network (10.0.0.0/22), got %s", describe(e))}
		}
		p, err := netip.ParsePrefix(e.Value)
		if err != nil || !p.Addr().Is4() {
			return &atLine{e.Line, fmt.Sprintf("expected an IPv4 network (10.0.0.0/22), got %q", e.Value)}
		}
		if p.Bits() < MinDiscoveryPrefix {
			return &atLine{e.Line, fmt.Sprintf("%s is larger than a /%d (%d addresses): sweep smaller subnets", e.Value, MinDiscoveryPrefix, 1<<(32-p.Bits()))}
		}
		out = append(out, p.Masked())
	}
	*dst = out
	return nil
}

// proxyOptions is the option table of one relay: proxy: entry.
func proxyOptions() map[string]*option[Proxy] {
	type P = Proxy
	return table([]option[P]{
		optFunc("id", "string", func(p *P, v value) error { return v.id(&p.ID) }, func(p *P) any { return p.ID }, "the proxy minion's id (required)"),
		optOneOf("proxytype", func(p *P) *string { return &p.ProxyType }, ProxyTypes, "how the relay speaks to the device (required)"),
		optStr("host", func(p *P) *string { return &p.Host }, "ssh, onvif: the device's address"),
		optPort("port", func(p *P) *int { return &p.Port }, "ssh: default 22; onvif: default 80"),
		optStr("url", func(p *P) *string { return &p.URL }, "http: the device's base URL; onvif: its device service URL"),
		optStr("username", func(p *P) *string { return &p.Username }, "the user the relay logs in as"),
		optStr("password", func(p *P) *string { return &p.Password }, "the password, in the config (prefer password_pillar)"),
		optStr("password_pillar", func(p *P) *string { return &p.PasswordPillar }, "colon path into the relay's pillar holding the password (proxy:cam7:password)"),
		optStr("key_file", func(p *P) *string { return &p.KeyFile }, "ssh: private key file"),
		optStr("known_hosts", func(p *P) *string { return &p.KnownHosts }, "ssh: known_hosts file (default pki_dir/proxy_known_hosts)"),
		optBool("accept_new_hostkey", func(p *P) *bool { return &p.AcceptNewHostKey }, "ssh: record the host key of a device seen for the first time"),
		optRange("timeout", 1, 3600, func(p *P) *int { return &p.Timeout }, "seconds one call to the device may take"),
		optStr("health_path", func(p *P) *string { return &p.HealthPath }, "http: the path test.ping GETs"),
		optMap("grains", func(p *P) *map[string]any { return &p.Grains }, "static grains of the proxy minion"),
	})
}

// ProxyOptions documents the options of a relay: proxy: entry.
func ProxyOptions() []OptionDoc { return docs(proxyOptions(), &Proxy{Timeout: 10, HealthPath: "/"}) }

// proxies parses the proxy: list.
func (v value) proxies(dst *[]Proxy) error {
	n := v.node()
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("expected a list of proxy minions, got %s", describe(n))
	}
	if len(n.Content) > MaxProxies {
		return &atLine{n.Line, fmt.Sprintf("%d proxy minions, at most %d", len(n.Content), MaxProxies)}
	}
	opts := proxyOptions()
	seen := make(map[string]int, len(n.Content))
	out := make([]Proxy, 0, len(n.Content))
	for _, e := range n.Content {
		e = resolve(e)
		if e.Kind != yaml.MappingNode {
			return &atLine{e.Line, fmt.Sprintf("a proxy minion is a mapping (id, proxytype, ...), got %s", describe(e))}
		}
		p := Proxy{Timeout: 10, Line: e.Line}
		for i := 0; i+1 < len(e.Content); i += 2 {
			k, val := resolve(e.Content[i]), e.Content[i+1]
			o, ok := opts[k.Value]
			if k.Kind != yaml.ScalarNode || !ok {
				names := make([]string, 0, len(opts))
				for _, d := range docs(opts, &p) {
					names = append(names, d.Name)
				}
				return &atLine{k.Line, fmt.Sprintf("unknown proxy option %s (known: %s)", describe(k), strings.Join(names, ", "))}
			}
			if isNull(val) {
				continue
			}
			if err := o.set(&p, value{n: val}); err != nil {
				return inner(k, err)
			}
		}
		if err := p.check(); err != nil {
			return &atLine{e.Line, err.Error()}
		}
		if l, dup := seen[p.ID]; dup {
			return &atLine{e.Line, fmt.Sprintf("proxy minion %s is also at line %d", p.ID, l)}
		}
		seen[p.ID] = e.Line
		out = append(out, p)
	}
	*dst = out
	return nil
}

// check checks what one entry needs for its type.
func (p *Proxy) check() error {
	switch {
	case p.ID == "":
		return errors.New("proxy minion without id")
	case p.ProxyType == "":
		return fmt.Errorf("proxy minion %s: no proxytype (%s)", p.ID, strings.Join(ProxyTypes, ", "))
	}
	switch p.ProxyType {
	case "ssh":
		if p.Host == "" {
			return fmt.Errorf("proxy minion %s: proxytype ssh needs host", p.ID)
		}
		if p.Username == "" {
			return fmt.Errorf("proxy minion %s: proxytype ssh needs username", p.ID)
		}
	case "onvif":
		if p.Host == "" && p.URL == "" {
			return fmt.Errorf("proxy minion %s: proxytype onvif needs host or url", p.ID)
		}
	case "http":
		if p.URL == "" {
			return fmt.Errorf("proxy minion %s: proxytype http needs url", p.ID)
		}
	}
	if p.URL != "" && !strings.HasPrefix(p.URL, "http://") && !strings.HasPrefix(p.URL, "https://") {
		return fmt.Errorf("proxy minion %s: url %q is not http:// or https://", p.ID, p.URL)
	}
	if p.PasswordPillar != "" && strings.Trim(p.PasswordPillar, ":") == "" {
		return fmt.Errorf("proxy minion %s: password_pillar %q names no key", p.ID, p.PasswordPillar)
	}
	return nil
}

// Check checks what one proxy entry needs for its type: the checks of
// the relay: proxy: list, for entries made at run time (relay/dynproxy.go).
func (p *Proxy) Check() error { return p.check() }
