package engines

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Opts are one engine's options. A factory takes the options it knows; the
// Manager refuses the ones left over, so a misspelt option stops the daemon
// at start with the engine's name and the option.
type Opts struct {
	m    map[string]any
	used map[string]bool
}

// NewOpts wraps an options map (nil: none).
func NewOpts(m map[string]any) *Opts {
	if m == nil {
		m = map[string]any{}
	}
	return &Opts{m: m, used: map[string]bool{}}
}

// All returns every option and marks them all taken (user engines get the
// whole map).
func (o *Opts) All() map[string]any {
	for k := range o.m {
		o.used[k] = true
	}
	return o.m
}

// Take returns an option and marks it known.
func (o *Opts) Take(key string) (any, bool) {
	v, ok := o.m[key]
	if ok {
		o.used[key] = true
	}
	return v, ok && v != nil
}

// Done returns an error naming the options nobody took.
func (o *Opts) Done() error {
	var left []string
	for k := range o.m {
		if !o.used[k] {
			left = append(left, k)
		}
	}
	if len(left) == 0 {
		return nil
	}
	sort.Strings(left)
	return fmt.Errorf("unknown option %s", strings.Join(left, ", "))
}

// String returns a string option, def when unset.
func (o *Opts) String(key, def string) (string, error) {
	v, ok := o.Take(key)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("option %s: expected a string, got %v", key, v)
}

// Required returns a string option that must be set.
func (o *Opts) Required(key string) (string, error) {
	s, err := o.String(key, "")
	if err == nil && s == "" {
		err = fmt.Errorf("option %s is required", key)
	}
	return s, err
}

// Int returns an integer option in [min, max].
func (o *Opts) Int(key string, def, min, max int) (int, error) {
	v, ok := o.Take(key)
	if !ok {
		return def, nil
	}
	var n int
	switch x := v.(type) {
	case int:
		n = x
	case int64:
		n = int(x)
	case uint64:
		n = int(x)
	case float64:
		n = int(x)
		if float64(n) != x {
			return 0, fmt.Errorf("option %s: expected an integer, got %v", key, v)
		}
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(x)); err != nil {
			return 0, fmt.Errorf("option %s: expected an integer, got %q", key, x)
		}
	default:
		return 0, fmt.Errorf("option %s: expected an integer, got %v", key, v)
	}
	if n < min || n > max {
		return 0, fmt.Errorf("option %s: %d is out of range [%d, %d]", key, n, min, max)
	}
	return n, nil
}

// Seconds returns a duration given in seconds (int, float or numeric
// string), which must be positive.
func (o *Opts) Seconds(key string, def time.Duration) (time.Duration, error) {
	v, ok := o.Take(key)
	if !ok {
		return def, nil
	}
	var f float64
	switch x := v.(type) {
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case uint64:
		f = float64(x)
	case float64:
		f = x
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, fmt.Errorf("option %s: expected a number of seconds, got %q", key, x)
		}
	default:
		return 0, fmt.Errorf("option %s: expected a number of seconds, got %v", key, v)
	}
	if f <= 0 || f > 366*86400 {
		return 0, fmt.Errorf("option %s: expected a positive number of seconds, got %v", key, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// Bool returns a boolean option.
func (o *Opts) Bool(key string, def bool) (bool, error) {
	v, ok := o.Take(key)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "true", "yes", "on", "1":
			return true, nil
		case "false", "no", "off", "0":
			return false, nil
		}
	}
	return false, fmt.Errorf("option %s: expected True or False, got %v", key, v)
}

// Strings returns a list of strings; a single string is a list of one.
func (o *Opts) Strings(key string, def []string) ([]string, error) {
	v, ok := o.Take(key)
	if !ok {
		return def, nil
	}
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, it := range x {
			s, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("option %s: expected a list of strings, got an item %v", key, it)
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("option %s: expected a string or a list of strings, got %v", key, v)
}

// Map returns a mapping option.
func (o *Opts) Map(key string) (map[string]any, error) {
	v, ok := o.Take(key)
	if !ok {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("option %s: expected a mapping, got %v", key, v)
	}
	return m, nil
}
