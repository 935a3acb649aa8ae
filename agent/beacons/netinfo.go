package beacons

import (
	"context"
	"fmt"
	"sort"
)

// network_info (Salt's network_info beacon): per interface, the counters
// of /proc/net/dev (bytes_sent, bytes_recv, packets_sent, packets_recv,
// errin, errout, dropin, dropout); fires {interface, network_info} when each
// given counter compares to its value as type says (equal, greater or
// less; default equal), or every time when none is given.
//
//	beacons:
//	  network_info:
//	    - interfaces:
//	        eth0:
//	          type: greater
//	          bytes_recv: 100000000
func init() {
	counters := map[string]bool{"bytes_sent": true, "bytes_recv": true, "packets_sent": true, "packets_recv": true,
		"errin": true, "errout": true, "dropin": true, "dropout": true}
	register("network_info", func(o *opts, e *env) (Beacon, error) {
		ifs, err := o.mapping("interfaces", true)
		if err != nil {
			return nil, err
		}
		type rule struct {
			iface string
			cmp   string
			want  map[string]float64
		}
		var rules []rule
		for name, v := range ifs {
			r := rule{iface: name, cmp: "equal", want: map[string]float64{}}
			if v != nil {
				m, err := toMap(v)
				if err != nil {
					return nil, fmt.Errorf("option interfaces: %s: %w", name, err)
				}
				for k, x := range m {
					switch {
					case k == "type":
						s, _ := x.(string)
						if s != "equal" && s != "greater" && s != "less" {
							return nil, fmt.Errorf("option interfaces: %s: type: expected equal, greater or less, got %v", name, x)
						}
						r.cmp = s
					case counters[k]:
						f, err := toFloat(x)
						if err != nil {
							return nil, fmt.Errorf("option interfaces: %s: %s: %w", name, k, err)
						}
						r.want[k] = f
					default:
						return nil, fmt.Errorf("option interfaces: %s: unknown counter %q", name, k)
					}
				}
			}
			rules = append(rules, r)
		}
		sort.Slice(rules, func(i, j int) bool { return rules[i].iface < rules[j].iface })
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			nd, err := netdev(e)
			if err != nil {
				return nil, err
			}
			var out []map[string]any
			for _, r := range rules {
				c, ok := nd[r.iface]
				if !ok {
					continue
				}
				fire := true
				for k, w := range r.want {
					v := float64(c[k].(uint64))
					switch r.cmp {
					case "equal":
						fire = fire && v == w
					case "greater":
						fire = fire && v > w
					case "less":
						fire = fire && v < w
					}
				}
				if fire {
					out = append(out, map[string]any{"interface": r.iface, "network_info": c})
				}
			}
			return out, nil
		}), nil
	})
}
