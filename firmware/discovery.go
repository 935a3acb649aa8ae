package firmware

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
)

// The devices to flash may come from the relays' site inventories
// (relay/discovery, the master's discovery.list runner): halite-flash ssh
// --from-discovery 'model=DS-2CD* vendor=Hik*' asks the running master for
// the devices matching a filter and flashes each at its most recent
// address.

// DiscoveryKeys are the keys a discovery filter takes: those of the
// discovery.list runner.
var DiscoveryKeys = []string{"relay", "unmanaged", "vendor", "mac", "ip", "model", "manufacturer", "hardware", "name"}

// maxDiscoveryFilter bounds a filter's length.
const maxDiscoveryFilter = 4096

// ParseDiscoveryFilter parses a filter of KEY=GLOB terms, separated by
// spaces or commas, all of which a device must match, into
// discovery.list's keyword arguments. unmanaged is True unless the filter
// says otherwise: a device already running an accepted agent is not
// flashed again by accident.
func ParseDiscoveryFilter(s string) (map[string]any, error) {
	if len(s) > maxDiscoveryFilter {
		return nil, fmt.Errorf("filter of %d bytes: at most %d", len(s), maxDiscoveryFilter)
	}
	terms := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	if len(terms) == 0 {
		return nil, fmt.Errorf("empty filter: give KEY=GLOB terms (%s)", strings.Join(DiscoveryKeys, ", "))
	}
	kw := map[string]any{}
	for _, t := range terms {
		k, v, ok := strings.Cut(t, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%q: want KEY=GLOB (%s)", t, strings.Join(DiscoveryKeys, ", "))
		case !known(k):
			return nil, fmt.Errorf("%q: unknown key %q (%s)", t, k, strings.Join(DiscoveryKeys, ", "))
		case v == "":
			return nil, fmt.Errorf("%q: empty value", t)
		}
		if _, dup := kw[k]; dup {
			return nil, fmt.Errorf("%q: %s given twice (terms are ANDed; use one glob)", t, k)
		}
		if k == "unmanaged" {
			b, ok := config.Bool(v)
			if !ok {
				return nil, fmt.Errorf("%q: unmanaged must be True or False", t)
			}
			kw[k] = b
			continue
		}
		kw[k] = v
	}
	if _, ok := kw["unmanaged"]; !ok {
		kw["unmanaged"] = true
	}
	return kw, nil
}

func known(k string) bool {
	for _, d := range DiscoveryKeys {
		if k == d {
			return true
		}
	}
	return false
}

// Discovered is one device of a relay's inventory.
type Discovered struct {
	Relay   string
	Key     string // its MAC, or ip:ADDRESS
	Addr    string // its most recent IP address
	Vendor  string
	Model   string
	Managed bool
}

// ErrNoMaster is returned by Discovered when no master socket is known.
var ErrNoMaster = errors.New("no master socket: --from-discovery asks the running master (give its config dir with -c)")

// Discovered asks the running master's discovery.list for the devices
// that filter (ParseDiscoveryFilter's) matches, sorted by relay and key,
// each device once (by address). Records come from devices through the
// relays: one whose address is not an IP address is left out and counted
// in skipped.
func (m *Master) Discovered(ctx context.Context, filter map[string]any) (devs []Discovered, skipped int, err error) {
	if m.Socket == "" {
		return nil, 0, ErrNoMaster
	}
	res, err := api.Call(ctx, m.Socket, &api.Request{Op: api.OpRunner, Fun: "discovery.list", Kwarg: filter, User: os.Getenv("USER")})
	if err != nil {
		return nil, 0, fmt.Errorf("discovery.list: %w", err)
	}
	byRelay, ok := res.(map[string]any)
	if !ok {
		return nil, 0, fmt.Errorf("discovery.list: the master returned %T, not a mapping of relays", res)
	}
	relays := make([]string, 0, len(byRelay))
	for r := range byRelay {
		relays = append(relays, r)
	}
	sort.Strings(relays)
	seen := map[string]bool{}
	for _, relay := range relays {
		list, _ := byRelay[relay].([]any)
		for _, v := range list {
			rec, _ := v.(map[string]any)
			d, ok := discovered(relay, rec)
			if !ok {
				skipped++
				continue
			}
			if seen[d.Addr] {
				continue
			}
			seen[d.Addr] = true
			devs = append(devs, d)
		}
	}
	return devs, skipped, nil
}

// discovered reads one record of discovery.list; ok is false when it has
// no usable address.
func discovered(relay string, rec map[string]any) (Discovered, bool) {
	d := Discovered{Relay: relay}
	d.Key, _ = rec["key"].(string)
	d.Vendor, _ = rec["vendor"].(string)
	d.Managed, _ = rec["managed"].(bool)
	if o, ok := rec["onvif"].(map[string]any); ok {
		d.Model, _ = o["model"].(string)
	}
	ips, _ := rec["ips"].([]any)
	if len(ips) == 0 {
		return d, false
	}
	s, _ := ips[0].(string) // the most recent first
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return d, false
	}
	d.Addr = a.Unmap().String()
	return d, true
}
