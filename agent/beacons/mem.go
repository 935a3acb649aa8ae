package beacons

import (
	"context"
	"fmt"
)

// memusage (Salt's memusage beacon): fires {memusage: percent} while the
// used memory is at or above percent.
//
//	beacons:
//	  memusage:
//	    - percent: 63%
//	    - interval: 10
func init() {
	register("memusage", func(o *opts, e *env) (Beacon, error) {
		limit, err := percentOpt(o, "percent")
		if err != nil {
			return nil, err
		}
		var buf []byte
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			mi, err := meminfo(e, &buf, "MemTotal", "MemAvailable", "MemFree", "Buffers", "Cached")
			if err != nil {
				return nil, err
			}
			p, err := memPercent(mi)
			if err != nil || p < limit {
				return nil, err
			}
			return []map[string]any{{"memusage": p}}, nil
		}), nil
	})
	// swapusage (Salt's swapusage beacon): fires {swapusage: percent} while
	// the used swap is at or above percent.
	register("swapusage", func(o *opts, e *env) (Beacon, error) {
		limit, err := percentOpt(o, "percent")
		if err != nil {
			return nil, err
		}
		var buf []byte
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			mi, err := meminfo(e, &buf, "SwapTotal", "SwapFree")
			if err != nil {
				return nil, err
			}
			total := mi["SwapTotal"]
			if total == 0 {
				return nil, nil
			}
			p := round2(float64(total-mi["SwapFree"]) / float64(total) * 100)
			if p < limit {
				return nil, nil
			}
			return []map[string]any{{"swapusage": p}}, nil
		}), nil
	})
}

func percentOpt(o *opts, key string) (float64, error) {
	v, ok := o.take(key)
	if !ok {
		return 0, fmt.Errorf("option %s is required (for example %s: 63%%)", key, key)
	}
	p, err := toPercent(v)
	if err != nil {
		return 0, fmt.Errorf("option %s: %w", key, err)
	}
	return p, nil
}
