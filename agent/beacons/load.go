package beacons

import (
	"context"
	"fmt"
)

// load (Salt's load beacon): fires {1m, 5m, 15m} when a load average is
// outside its [low, high] range. With no averages it fires every time.
//
//	beacons:
//	  load:
//	    - averages:
//	        1m: [0.0, 2.0]
//	        5m: [0.0, 1.5]
//	        15m: [0.1, 1.0]
//	    - onchangeonly: True
func init() {
	register("load", func(o *opts, e *env) (Beacon, error) {
		av, err := o.mapping("averages", false)
		if err != nil {
			return nil, err
		}
		ranges := map[string][2]float64{}
		for k, v := range av {
			if k != "1m" && k != "5m" && k != "15m" {
				return nil, fmt.Errorf("option averages: unknown average %q (want 1m, 5m or 15m)", k)
			}
			l, ok := v.([]any)
			if !ok || len(l) != 2 {
				return nil, fmt.Errorf("option averages: %s: expected [low, high], got %v", k, v)
			}
			lo, err1 := toFloat(l[0])
			hi, err2 := toFloat(l[1])
			if err1 != nil || err2 != nil || lo > hi {
				return nil, fmt.Errorf("option averages: %s: expected [low, high] numbers, got %v", k, v)
			}
			ranges[k] = [2]float64{lo, hi}
		}
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			la, err := loadavg(e)
			if err != nil {
				return nil, err
			}
			fire := len(ranges) == 0
			for k, r := range ranges {
				v := la[k].(float64)
				if v < r[0] || v > r[1] {
					fire = true
				}
			}
			if !fire {
				return nil, nil
			}
			return []map[string]any{la}, nil
		}), nil
	})
}
