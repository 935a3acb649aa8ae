package protocol

// ProxyCtl asks a relay to add, remove or list its run-time proxy minions,
// master to relay on the relay link's control stream (runners proxy.add,
// proxy.remove and proxy.list). The link is the master's own authenticated
// connection (the relay pins the master's key), so the relay takes the
// message as the master's; what it asks still comes from a runner's
// arguments, which a reaction may fill from a device's event data, and
// the relay checks it as hostile input (relay/dynproxy.go). The relay
// answers with a ProxyAnswer of the same Req. Only a relay of capability
// CapProxyAdd or more is sent one; both are decoded by DecodeLink only,
// so that a device agent does not carry their decoders.
type ProxyCtl struct {
	Req uint64 `cbor:"1,keyasint"`
	Op  string `cbor:"2,keyasint"` // add, remove, list
	ID  string `cbor:"3,keyasint,omitempty"`
	// Entry is the proxy minion's options (add): proxytype, mac or ip,
	// username, password_pillar, port, url, health_path, timeout,
	// accept_new_host_key, grains.
	Entry map[string]any `cbor:"4,keyasint,omitempty"`
}

func (*ProxyCtl) Type() Type { return TypeProxyCtl }

// MaxProxyCtl bounds a ProxyCtl's id and its entry's options.
const (
	MaxProxyCtlID      = 256
	MaxProxyCtlOptions = 32
)

func (c *ProxyCtl) validate() error {
	switch {
	case c.Op != "add" && c.Op != "remove" && c.Op != "list":
		return Errorf(KindMalformed, "proxy_ctl: unknown operation %.32q", c.Op)
	case len(c.ID) > MaxProxyCtlID:
		return Errorf(KindMalformed, "proxy_ctl: id longer than %d bytes", MaxProxyCtlID)
	case len(c.Entry) > MaxProxyCtlOptions:
		return Errorf(KindMalformed, "proxy_ctl: %d options, at most %d", len(c.Entry), MaxProxyCtlOptions)
	}
	return nil
}

// ProxyAnswer answers a ProxyCtl, relay to master: Err says why the relay
// refused; Proxies lists the relay's proxy minions (list; add and remove:
// the one changed), each a map of id, proxytype, host, dynamic, state.
type ProxyAnswer struct {
	Req     uint64           `cbor:"1,keyasint"`
	Err     string           `cbor:"2,keyasint,omitempty"`
	Proxies []map[string]any `cbor:"3,keyasint,omitempty"`
}

func (*ProxyAnswer) Type() Type { return TypeProxyAnswer }

func (a *ProxyAnswer) validate() error {
	if len(a.Err) > 4096 || len(a.Proxies) > 1<<15 {
		return Errorf(KindMalformed, "proxy_answer longer than its bounds")
	}
	return nil
}
