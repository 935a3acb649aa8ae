package beacons

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
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
		var buf []byte
		return checkFunc(func(context.Context) ([]map[string]any, error) {
			mounts, err := mountPoints(e, &buf)
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
func mountPoints(e *env, buf *[]byte) ([]string, error) {
	b, err := readInto(filepath.Join(e.proc, "self", "mounts"), buf)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	var out []string
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		// device mountpoint fstype options 0 0
		_, rest, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			continue
		}
		mp, _, _ := bytes.Cut(rest, []byte(" "))
		s := string(mp)
		if bytes.Contains(mp, []byte(`\040`)) {
			s = strings.ReplaceAll(s, `\040`, " ")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
