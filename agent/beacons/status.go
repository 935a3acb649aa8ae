package beacons

import (
	"context"
	"fmt"
	"time"
)

// status (Salt's status beacon): fires the system's figures each interval,
// tagged with the time. With no options it reports loadavg, cpustats,
// meminfo and time; a list of names picks among loadavg, cpustats, meminfo,
// netdev, uptime and time.
//
//	beacons:
//	  status:
//	    - interval: 60
//	    - loadavg: ['1m']   # Salt's per-function selection of keys
//	    - meminfo: [MemTotal, MemAvailable]
func init() {
	register("status", func(o *opts, e *env) (Beacon, error) {
		all := []string{"loadavg", "cpustats", "meminfo", "time"}
		known := map[string]bool{"loadavg": true, "cpustats": true, "meminfo": true, "netdev": true, "uptime": true, "time": true}
		sel := map[string][]string{}
		for k := range o.m {
			if !known[k] {
				continue // left for done() to name
			}
			v, _ := o.take(k)
			var keys []string
			if l, ok := v.([]any); ok {
				for _, it := range l {
					s, ok := it.(string)
					if !ok {
						return nil, fmt.Errorf("option %s: expected a list of key names, got %v", k, v)
					}
					keys = append(keys, s)
				}
			} else if v != nil {
				return nil, fmt.Errorf("option %s: expected a list of key names, got %v", k, v)
			}
			sel[k] = keys
		}
		if len(sel) == 0 {
			for _, f := range all {
				sel[f] = nil
			}
		}
		var buf []byte
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			now := time.Now()
			data := map[string]any{}
			for f, keys := range sel {
				var v map[string]any
				var err error
				switch f {
				case "loadavg":
					v, err = loadavg(e)
				case "cpustats":
					v, err = cpustats(e)
				case "meminfo":
					var mi map[string]uint64
					if mi, err = meminfo(e, &buf, keys...); err == nil {
						v = map[string]any{}
						for k, n := range mi {
							v[k] = map[string]any{"value": n, "unit": "kB"}
						}
					}
				case "netdev":
					var nd map[string]map[string]any
					if nd, err = netdev(e); err == nil {
						v = map[string]any{}
						for k, n := range nd {
							v[k] = n
						}
					}
				case "uptime":
					v, err = uptime(e)
				case "time":
					v = map[string]any{"tm_year": now.Year(), "tm_mon": int(now.Month()), "tm_mday": now.Day(),
						"tm_hour": now.Hour(), "tm_min": now.Minute(), "tm_sec": now.Second(), "tm_wday": int(now.Weekday()),
						"tm_yday": now.YearDay()}
				}
				if err != nil {
					return nil, err
				}
				if len(keys) > 0 {
					picked := map[string]any{}
					for _, k := range keys {
						if x, ok := v[k]; ok {
							picked[k] = x
						}
					}
					v = picked
				}
				data[f] = v
			}
			return []map[string]any{{"tag": now.Format("2006-01-02T15:04:05.000000"), "data": data}}, nil
		}), nil
	})
}
