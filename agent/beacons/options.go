package beacons

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// opts is one beacon's merged options; the beacon takes the ones it knows
// and done refuses any left over, so that a misspelt option is an error at
// start, not a beacon silently doing something else.
type opts struct {
	m    map[string]any
	used map[string]bool
}

func newOpts(m map[string]any) *opts { return &opts{m: m, used: map[string]bool{}} }

func (o *opts) take(key string) (any, bool) {
	v, ok := o.m[key]
	if ok {
		o.used[key] = true
	}
	return v, ok
}

// done returns an error naming the options nobody took.
func (o *opts) done() error {
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

func (o *opts) str(key string, required bool) (string, error) {
	v, ok := o.take(key)
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("option %s is required", key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("option %s: expected a string, got %v", key, v)
	}
	return s, nil
}

func (o *opts) boolean(key string, def bool) (bool, error) {
	v, ok := o.take(key)
	if !ok || v == nil {
		return def, nil
	}
	b, err := toBool(v)
	if err != nil {
		return false, fmt.Errorf("option %s: %w", key, err)
	}
	return b, nil
}

func (o *opts) mapping(key string, required bool) (map[string]any, error) {
	v, ok := o.take(key)
	if !ok || v == nil {
		if required {
			return nil, fmt.Errorf("option %s is required", key)
		}
		return nil, nil
	}
	m, err := toMap(v)
	if err != nil {
		return nil, fmt.Errorf("option %s: %w", key, err)
	}
	return m, nil
}

// toMap accepts a mapping or Salt's list of one-key mappings.
func toMap(v any) (map[string]any, error) {
	switch x := v.(type) {
	case map[string]any:
		return x, nil
	case []any:
		out := map[string]any{}
		for _, it := range x {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("expected a list of one-key mappings, got an item %v", it)
			}
			for k, v := range m {
				out[k] = v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a mapping or a list of one-key mappings, got %v", v)
}

func toBool(v any) (bool, error) {
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
	case int:
		return x != 0, nil
	}
	return false, fmt.Errorf("expected a boolean, got %v", v)
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case uint64:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err == nil {
			return f, nil
		}
	}
	return 0, fmt.Errorf("expected a number, got %v", v)
}

// toPercent reads Salt's "63%" (or 63, or "63") as 63.
func toPercent(v any) (float64, error) {
	if s, ok := v.(string); ok {
		s = strings.TrimSuffix(strings.TrimSpace(s), "%")
		v = s
	}
	f, err := toFloat(v)
	if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
		return 0, fmt.Errorf("expected a percentage like 63%%, got %v", v)
	}
	return f, nil
}

// toSeconds reads an interval in seconds (int, float or numeric string).
func toSeconds(v any) (time.Duration, error) {
	f, err := toFloat(v)
	if err != nil || f <= 0 || f > 86400*365 {
		return 0, fmt.Errorf("expected a positive number of seconds, got %v", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func compileRegexp(key, expr string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("option %s: bad regular expression %q: %w", key, expr, err)
	}
	return re, nil
}
