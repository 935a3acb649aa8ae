package returners

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/halite-fleet/halite/config"
)

// Options reads one backend's options the way Salt's
// get_returner_options does, for the option prefix virtual ("redis",
// "returner.pgjsonb", ...): ret_kwargs first, then
// "<ret_config>.<virtual>.<attr>", then "<virtual>.<attr>". Each key is
// looked up flat (as Salt writes it: `redis.host: ...`) and, for
// convenience, nested (`redis: {host: ...}`).
type Options struct {
	cfg      Config
	virtual  string
	prefixes []string
}

// Options returns the option reader for the prefix virtual; more prefixes
// are tried in order after it ("returner.pgjsonb", then "pgjsonb").
func (c Config) Options(virtual string, more ...string) Options {
	return Options{cfg: c, virtual: virtual, prefixes: append([]string{virtual}, more...)}
}

// Get returns the value of attr and whether it is set.
func (o Options) Get(attr string) (any, bool) {
	if v, ok := o.cfg.Kwargs[attr]; ok {
		return v, true
	}
	for _, p := range o.prefixes {
		if o.cfg.RetConfig != "" {
			if v, ok := lookup(o.cfg.Opts, o.cfg.RetConfig+"."+p+"."+attr); ok {
				return v, true
			}
		}
	}
	for _, p := range o.prefixes {
		if v, ok := lookup(o.cfg.Opts, p+"."+attr); ok {
			return v, true
		}
	}
	return nil, false
}

// lookup finds a dotted key flat, or by walking nested maps at any dot.
func lookup(m map[string]any, key string) (any, bool) {
	if v, ok := m[key]; ok && v != nil {
		return v, true
	}
	for i := 0; i < len(key); i++ {
		if key[i] != '.' {
			continue
		}
		if sub, ok := m[key[:i]].(map[string]any); ok {
			if v, ok := lookup(sub, key[i+1:]); ok {
				return v, true
			}
		}
	}
	return nil, false
}

// String returns attr as a string, or def.
func (o Options) String(attr, def string) string {
	v, ok := o.Get(attr)
	if !ok {
		return def
	}
	return fmt.Sprint(v)
}

// Int returns attr as an integer, or def; a value that is not one is an
// error naming the option.
func (o Options) Int(attr string, def int) (int, error) {
	v, ok := o.Get(attr)
	if !ok {
		return def, nil
	}
	switch v := v.(type) {
	case int:
		return v, nil
	case int64:
		return int(v), nil
	case uint64:
		return int(v), nil
	case float64:
		if v == float64(int(v)) {
			return int(v), nil
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("option %s.%s: expected an integer, got %v", o.virtual, attr, v)
}

// Bool returns attr as a boolean (YAML 1.1 words too), or def.
func (o Options) Bool(attr string, def bool) (bool, error) {
	v, ok := o.Get(attr)
	if !ok {
		return def, nil
	}
	if b, ok := config.Bool(v); ok {
		return b, nil
	}
	return false, fmt.Errorf("option %s.%s: expected True or False, got %v", o.virtual, attr, v)
}

// Seconds returns attr, a number of seconds, as a duration, or def.
func (o Options) Seconds(attr string, def time.Duration) (time.Duration, error) {
	v, ok := o.Get(attr)
	if !ok {
		return def, nil
	}
	switch v := v.(type) {
	case int:
		return time.Duration(v) * time.Second, nil
	case float64:
		return time.Duration(v * float64(time.Second)), nil
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return time.Duration(f * float64(time.Second)), nil
		}
	}
	return 0, fmt.Errorf("option %s.%s: expected seconds, got %v", o.virtual, attr, v)
}
