package relay

// Run-time proxy minions: the master adds and removes them (runners
// proxy.add, proxy.remove, proxy.list; protocol.ProxyCtl on the link's
// control stream), typically from a reaction to
// halite/relay/<id>/discovery/new. The message comes on the master's own
// connection, but what it asks may come from a device's event data, so it
// is checked as hostile input:
//
//   - the device must be one the relay's discovery inventory holds, by
//     MAC or by address, and the proxy minion talks only to that address
//     (a url must name it): a reaction cannot point the relay, and the
//     credentials it holds, at any other host;
//   - password_pillar must be under the relay pillar's proxy: key, so
//     that what a reaction can hand a device is only what the operator put
//     there for devices;
//   - the id must be valid, not the relay's, not a proxy minion's already
//     (the config's or an earlier one) nor a device's behind the relay;
//   - at most proxy_dynamic_max of them (default 256).
//
// They are kept in cachedir/relay-proxies.cbor (0600, written atomically
// under the lock that guards the relay's proxy list), and made again at
// the relay's next start, without asking the inventory again: the entry
// was checked when added and the file is the relay's own.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/protocol"
)

// dynamicFile is where the run-time proxy minions are kept.
func (r *Relay) dynamicFile() string {
	return filepath.Join(r.o.Config.CacheDir, "relay-proxies.cbor")
}

// savedProxies is dynamicFile's content.
type savedProxies struct {
	Version int            `cbor:"v"`
	Entries []config.Proxy `cbor:"entries"`
}

// maxDynamicFile bounds the file read back.
const maxDynamicFile = 16 << 20

// loadDynamic makes the run-time proxy minions kept by the previous run.
// An entry that no longer fits (its id now in the config, past the
// bound, failing its checks) is dropped with a warning.
func (r *Relay) loadDynamic() error {
	path := r.dynamicFile()
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run-time proxy minions: %w", err)
	}
	if fi.Size() > maxDynamicFile {
		return fmt.Errorf("run-time proxy minions %s: %d bytes, more than %d", path, fi.Size(), maxDynamicFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("run-time proxy minions: %w", err)
	}
	var s savedProxies
	if err := protocol.Unmarshal(b, &s); err != nil {
		r.log.Warn("run-time proxy minions not read: starting without them", zap.String("file", path), zap.Error(err))
		return nil
	}
	n := 0
	for _, e := range s.Entries {
		e.Line = 0
		switch {
		case n >= r.conf.ProxyDynamicMax:
			r.log.Warn("run-time proxy minion dropped: past proxy_dynamic_max", zap.String("proxy", e.ID))
			continue
		case r.proxyByID[e.ID] != nil:
			r.log.Warn("run-time proxy minion dropped: its id is taken", zap.String("proxy", e.ID))
			continue
		}
		if err := checkDynamic(&e); err != nil {
			r.log.Warn("run-time proxy minion dropped", zap.String("proxy", e.ID), zap.Error(err))
			continue
		}
		p, err := r.makeProxy(e)
		if err != nil {
			r.log.Warn("run-time proxy minion dropped", zap.String("proxy", e.ID), zap.Error(err))
			continue
		}
		p.dynamic = true
		r.proxies = append(r.proxies, p)
		r.proxyByID[e.ID] = p
		n++
	}
	return nil
}

// checkDynamic checks an entry as made by dynamicEntry (also when read
// back from the relay's file).
func checkDynamic(e *config.Proxy) error {
	if err := protocol.ValidID(e.ID); err != nil {
		return err
	}
	if e.Password != "" || e.KeyFile != "" || e.KnownHosts != "" {
		return errors.New("a run-time proxy minion takes its password from the relay's pillar only")
	}
	return e.Check()
}

// saveDynamicLocked writes the run-time proxy minions (r.proxyMu held).
func (r *Relay) saveDynamicLocked() error {
	s := savedProxies{Version: 1}
	for _, p := range r.proxies {
		if p.dynamic {
			s.Entries = append(s.Entries, p.m.Entry())
		}
	}
	b, err := protocol.Marshal(&s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.dynamicFile()), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(r.dynamicFile(), b, 0o600)
}

// proxyCount is how many proxy minions the relay has now.
func (r *Relay) proxyCount() int {
	r.proxyMu.RLock()
	defer r.proxyMu.RUnlock()
	return len(r.proxies)
}

// proxyCtl answers the master's ProxyCtl.
func (r *Relay) proxyCtl(l *link, c *protocol.ProxyCtl) {
	ans := &protocol.ProxyAnswer{Req: c.Req}
	var err error
	switch c.Op {
	case "add":
		var p *proxySession
		if p, err = r.addProxy(c.ID, c.Entry); err == nil {
			ans.Proxies = []map[string]any{proxyInfo(p)}
			e := p.m.Entry()
			r.log.Info("run-time proxy minion added", zap.String("proxy", c.ID), zap.String("host", e.Host+e.URL))
			r.event("halite/relay/"+r.o.Config.ID+"/proxy/"+c.ID+"/added", proxyInfo(p))
		}
	case "remove":
		var p *proxySession
		if p, err = r.removeProxy(c.ID); err == nil {
			ans.Proxies = []map[string]any{proxyInfo(p)}
			r.log.Info("run-time proxy minion removed", zap.String("proxy", c.ID))
			r.event("halite/relay/"+r.o.Config.ID+"/proxy/"+c.ID+"/removed", map[string]any{"id": c.ID})
		}
	case "list":
		for _, p := range r.proxyList() {
			ans.Proxies = append(ans.Proxies, proxyInfo(p))
		}
	}
	if err != nil {
		ans.Err = err.Error()
		r.log.Info("proxy."+c.Op+" refused", zap.String("proxy", c.ID), zap.Error(err))
	}
	if werr := l.ctrl.Write(ans); werr != nil {
		r.log.Debug("proxy answer not sent", zap.Error(werr))
	}
}

// proxyInfo is what proxy.list says of p.
func proxyInfo(p *proxySession) map[string]any {
	p.mu.Lock()
	st := p.state
	p.mu.Unlock()
	state := map[int]string{proxyDown: "down", proxyPending: "pending", proxyUp: "up"}[st]
	e := p.m.Entry()
	out := map[string]any{"id": e.ID, "proxytype": e.ProxyType, "dynamic": p.dynamic, "state": state}
	if e.Host != "" {
		out["host"] = e.Host
	}
	if e.URL != "" {
		out["url"] = e.URL
	}
	if e.Port != 0 {
		out["port"] = e.Port
	}
	return out
}

// addProxy adds the run-time proxy minion id with options opts.
func (r *Relay) addProxy(id string, opts map[string]any) (*proxySession, error) {
	if r.conf.ProxyDynamicMax == 0 {
		return nil, errors.New("this relay takes no run-time proxy minions (proxy_dynamic_max: 0)")
	}
	if r.disc == nil {
		return nil, errors.New("this relay has no discovery: section: a run-time proxy minion must be a device its discovery found")
	}
	e, err := r.dynamicEntry(id, opts)
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	_, agent := r.devices[id]
	r.mu.RUnlock()
	if agent {
		return nil, fmt.Errorf("id %s is a device agent's behind this relay", id)
	}
	p, err := r.makeProxy(e)
	if err != nil {
		return nil, err
	}
	p.dynamic = true
	r.proxyMu.Lock()
	defer r.proxyMu.Unlock()
	if old := r.proxyByID[id]; old != nil {
		if old.dynamic {
			return nil, fmt.Errorf("proxy minion %s exists already (added at run time; proxy.remove it first)", id)
		}
		return nil, fmt.Errorf("proxy minion %s exists already (in the relay's proxy: config)", id)
	}
	n := 0
	for _, q := range r.proxies {
		if q.dynamic {
			n++
		}
	}
	if n >= r.conf.ProxyDynamicMax {
		return nil, fmt.Errorf("the relay has %d run-time proxy minions, its proxy_dynamic_max", n)
	}
	r.proxies = append(r.proxies, p)
	r.proxyByID[id] = p
	if err := r.saveDynamicLocked(); err != nil {
		r.proxies = r.proxies[:len(r.proxies)-1]
		delete(r.proxyByID, id)
		return nil, fmt.Errorf("keep the run-time proxy minion: %w", err)
	}
	select {
	case r.proxyAdded <- struct{}{}:
	default:
	}
	return p, nil
}

// removeProxy removes the run-time proxy minion id and ends its session.
// Its key stays (pki_dir/proxy/<id>.pem): added again, it is the same
// minion to the master.
func (r *Relay) removeProxy(id string) (*proxySession, error) {
	if err := protocol.ValidID(id); err != nil {
		return nil, err
	}
	r.proxyMu.Lock()
	p := r.proxyByID[id]
	switch {
	case p == nil:
		r.proxyMu.Unlock()
		return nil, fmt.Errorf("no proxy minion %s on this relay", id)
	case !p.dynamic:
		r.proxyMu.Unlock()
		return nil, fmt.Errorf("proxy minion %s is in the relay's proxy: config: remove it there", id)
	}
	i := slices.Index(r.proxies, p)
	r.proxies = slices.Delete(r.proxies, i, i+1)
	delete(r.proxyByID, id)
	if err := r.saveDynamicLocked(); err != nil {
		r.proxies = slices.Insert(r.proxies, i, p)
		r.proxyByID[id] = p
		r.proxyMu.Unlock()
		return nil, fmt.Errorf("keep the run-time proxy minions: %w", err)
	}
	r.proxyMu.Unlock()
	p.removed.Store(true)
	p.down(nil)
	r.store.abandon(p.dev)
	return p, nil
}

// Bounds of a run-time entry's options.
const (
	maxDynString = 1024
	maxDynGrains = 16 << 10 // encoded bytes
)

// dynamicEntry makes the proxy entry that id and opts ask for, its
// address the one the discovery inventory holds for the device.
func (r *Relay) dynamicEntry(id string, opts map[string]any) (config.Proxy, error) {
	e := config.Proxy{ID: id, Timeout: 10}
	if err := protocol.ValidID(id); err != nil {
		return e, err
	}
	if id == r.o.Config.ID {
		return e, errors.New("a proxy minion may not use the relay's own id")
	}
	str := func(k string) (string, error) {
		v, ok := opts[k]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string, got %T", k, v)
		}
		if len(s) > maxDynString {
			return "", fmt.Errorf("%s longer than %d bytes", k, maxDynString)
		}
		return s, nil
	}
	num := func(k string, lo, hi int) (int, error) {
		v, ok := opts[k]
		if !ok {
			return 0, nil
		}
		var n int64
		switch v := v.(type) {
		case int64:
			n = v
		case uint64:
			n = int64(min(v, 1<<62))
		case string:
			var err error
			if n, err = strconv.ParseInt(v, 10, 32); err != nil {
				return 0, fmt.Errorf("%s must be a whole number, got %q", k, v)
			}
		default:
			return 0, fmt.Errorf("%s must be a whole number, got %T", k, v)
		}
		if n < int64(lo) || n > int64(hi) {
			return 0, fmt.Errorf("%s must be %d to %d, got %d", k, lo, hi, n)
		}
		return int(n), nil
	}
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "proxytype", "mac", "ip", "username", "password_pillar", "port", "url", "health_path", "timeout",
			"accept_new_host_key", "grains":
		default:
			return e, fmt.Errorf("unknown option %.64q (proxytype, mac, ip, username, password_pillar, port, url, health_path, timeout, accept_new_host_key, grains)", k)
		}
	}
	var err error
	if e.ProxyType, err = str("proxytype"); err != nil {
		return e, err
	}
	if !slices.Contains(config.ProxyTypes, e.ProxyType) {
		return e, fmt.Errorf("proxytype %.64q is not one of %s", e.ProxyType, strings.Join(config.ProxyTypes, ", "))
	}
	mac, err := str("mac")
	if err != nil {
		return e, err
	}
	ipS, err := str("ip")
	if err != nil {
		return e, err
	}
	var ip netip.Addr
	switch {
	case (mac == "") == (ipS == ""):
		return e, errors.New("name the device by mac or by ip (one of them), as the relay's discovery found it")
	case mac != "":
		if _, err := net.ParseMAC(mac); err != nil {
			return e, fmt.Errorf("mac %.64q: %v", mac, err)
		}
	default:
		if ip, err = netip.ParseAddr(ipS); err != nil {
			return e, fmt.Errorf("ip %.64q is not an address", ipS)
		}
	}
	rec, ok := r.disc.Find(mac, ip.Unmap())
	if !ok {
		return e, fmt.Errorf("device %s%s is not in the relay's discovery inventory: a run-time proxy minion must be a device the relay found", mac, ipS)
	}
	host := ip.Unmap()
	if mac != "" {
		if len(rec.IPs) == 0 {
			return e, fmt.Errorf("device %s has no address in the relay's discovery inventory", mac)
		}
		if host, err = netip.ParseAddr(rec.IPs[0]); err != nil {
			return e, fmt.Errorf("device %s: address %q", mac, rec.IPs[0])
		}
	}
	if e.Username, err = str("username"); err != nil {
		return e, err
	}
	if e.PasswordPillar, err = str("password_pillar"); err != nil {
		return e, err
	}
	if e.PasswordPillar != "" && !strings.HasPrefix(e.PasswordPillar, "proxy:") {
		return e, fmt.Errorf("password_pillar %.64q: a run-time proxy minion reads its password under the pillar's proxy: key only", e.PasswordPillar)
	}
	if e.Port, err = num("port", 1, 65535); err != nil {
		return e, err
	}
	if t, err := num("timeout", 1, 300); err != nil {
		return e, err
	} else if t != 0 {
		e.Timeout = t
	}
	if e.HealthPath, err = str("health_path"); err != nil {
		return e, err
	}
	if e.HealthPath != "" && !strings.HasPrefix(e.HealthPath, "/") {
		return e, fmt.Errorf("health_path %.64q must begin with /", e.HealthPath)
	}
	if v, ok := opts["accept_new_host_key"]; ok {
		b, ok := config.Bool(v)
		if !ok {
			return e, fmt.Errorf("accept_new_host_key must be True or False, got %v", v)
		}
		e.AcceptNewHostKey = b
	}
	if v, ok := opts["grains"]; ok {
		g, ok := v.(map[string]any)
		if !ok {
			return e, fmt.Errorf("grains must be a mapping, got %T", v)
		}
		if b, err := protocol.Marshal(g); err != nil || len(b) > maxDynGrains {
			return e, fmt.Errorf("grains must encode to at most %d bytes", maxDynGrains)
		}
		e.Grains = g
	}
	u, err := str("url")
	if err != nil {
		return e, err
	}
	hostPort := host.String()
	if e.Port != 0 {
		hostPort = net.JoinHostPort(host.String(), strconv.Itoa(e.Port))
	} else if host.Is6() {
		hostPort = "[" + host.String() + "]"
	}
	switch {
	case u != "":
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.User != nil {
			return e, fmt.Errorf("url %.64q is not an http:// or https:// URL without credentials", u)
		}
		h, err := netip.ParseAddr(pu.Hostname())
		if err != nil || h.Unmap() != host {
			return e, fmt.Errorf("url %.64q must name the device's address %s", u, host)
		}
		e.URL = u
	case e.ProxyType == "http":
		e.URL = "http://" + hostPort + "/"
	}
	if e.ProxyType == "ssh" || (e.ProxyType == "onvif" && e.URL == "") {
		e.Host = host.String()
	}
	return e, checkDynamic(&e)
}
