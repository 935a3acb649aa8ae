package beacons

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// diskusage (Salt's diskusage beacon): each option is a mount point (a
// regular expression matched against the whole mount point, as Salt does)
// and a threshold; fires {diskusage: percent, mount} for each mounted file
// system at or above its threshold.
//
//	beacons:
//	  diskusage:
//	    - /: 63%
//	    - ^/mnt/.*: 90%
//	    - interval: 120
func init() {
	register("diskusage", func(o *opts, e *env) (Beacon, error) {
		type rule struct {
			re    *regexp.Regexp
			limit float64
		}
		var rules []rule
		keys := make([]string, 0, len(o.m))
		for k := range o.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := o.take(k)
			p, err := toPercent(v)
			if err != nil {
				return nil, fmt.Errorf("option %s: %w", k, err)
			}
			re, err := compileRegexp(k, "^(?:"+strings.TrimSuffix(strings.TrimPrefix(k, "^"), "$")+")$")
			if err != nil {
				return nil, err
			}
			rules = append(rules, rule{re, p})
		}
		if len(rules) == 0 {
			return nil, fmt.Errorf("no mount points given (for example /: 63%%)")
		}
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			mounts, err := mountPoints(e)
			if err != nil {
				return nil, err
			}
			var out []map[string]any
			for _, mp := range mounts {
				for _, r := range rules {
					if !r.re.MatchString(mp) {
						continue
					}
					p, err := diskPercent(mp)
					if err != nil {
						continue // unmounted meanwhile, or unreadable
					}
					if p >= r.limit {
						out = append(out, map[string]any{"diskusage": p, "mount": mp})
					}
					break
				}
			}
			return out, nil
		}), nil
	})
}

// mountPoints lists the mount points in proc/self/mounts, each once.
func mountPoints(e *env) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(e.proc, "self", "mounts"))
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || seen[f[1]] {
			continue
		}
		mp := strings.ReplaceAll(f[1], `\040`, " ")
		seen[f[1]] = true
		out = append(out, mp)
	}
	return out, nil
}
