package beacons

import (
	"fmt"
	"sort"
	"time"
)

// Spec is one configured beacon: its name (the key under beacons:), the
// module that implements it (beacon_module, else the name), the options
// common to every beacon and the beacon's own ones.
type Spec struct {
	Name                  string
	Module                string
	Interval              time.Duration
	OnChangeOnly          bool
	EmitAtStartup         bool
	DisableDuringStateRun bool
	Enabled               bool
	// Raw is the configuration as given (merged into one mapping), kept for
	// beacons.list and beacons.save.
	Raw map[string]any
	own map[string]any // the module's own options
}

// common are the options every beacon takes, handled by the Manager.
var common = map[string]bool{
	"interval": true, "onchangeonly": true, "emitatstartup": true,
	"disable_during_state_run": true, "enabled": true, "beacon_module": true,
}

// ParseSpec reads one beacon's configuration (Salt's list of one-key
// mappings, or a mapping) and checks its options by building the beacon
// once. Errors name the beacon and the option.
func ParseSpec(name string, v any, def time.Duration) (*Spec, error) {
	if name == "" {
		return nil, fmt.Errorf("beacon with an empty name")
	}
	m, err := toMap(v)
	if v == nil {
		m, err = map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("beacon %s: %w", name, err)
	}
	s := &Spec{Name: name, Module: name, Interval: def, EmitAtStartup: true, Enabled: true, Raw: m, own: map[string]any{}}
	o := newOpts(m)
	for k, v := range m {
		if !common[k] {
			s.own[k] = v
		}
	}
	if iv, ok := o.take("interval"); ok {
		if s.Interval, err = toSeconds(iv); err != nil {
			return nil, fmt.Errorf("beacon %s: option interval: %w", name, err)
		}
	}
	for key, dst := range map[string]*bool{
		"onchangeonly": &s.OnChangeOnly, "emitatstartup": &s.EmitAtStartup,
		"disable_during_state_run": &s.DisableDuringStateRun, "enabled": &s.Enabled,
	} {
		if *dst, err = o.boolean(key, *dst); err != nil {
			return nil, fmt.Errorf("beacon %s: %w", name, err)
		}
	}
	if mod, err := o.str("beacon_module", false); err != nil {
		return nil, fmt.Errorf("beacon %s: %w", name, err)
	} else if mod != "" {
		s.Module = mod
	}
	if _, ok := modules[s.Module]; !ok {
		return nil, fmt.Errorf("beacon %s: no beacon module %q (have %v)", name, s.Module, Modules())
	}
	// Build once to check the module's own options; the Manager builds
	// again when it starts the beacon.
	b, err := s.build(defaultEnv())
	if err != nil {
		return nil, err
	}
	if c, ok := b.(interface{ Close() error }); ok {
		c.Close()
	}
	return s, nil
}

// ParseConfig reads the agent's beacons: option: a mapping of beacon name to
// its configuration. A top-level "enabled: false" (written by
// beacons.disable) turns every beacon off. It returns the beacons in name
// order.
func ParseConfig(v any, def time.Duration) (specs []*Spec, enabled bool, err error) {
	enabled = true
	if v == nil {
		return nil, true, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false, fmt.Errorf("beacons: expected a mapping of beacon names to their options, got %v", v)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "enabled" {
			if enabled, err = toBool(m[name]); err != nil {
				return nil, false, fmt.Errorf("beacons: option enabled: %w", err)
			}
			continue
		}
		s, err := ParseSpec(name, m[name], def)
		if err != nil {
			return nil, false, err
		}
		specs = append(specs, s)
	}
	return specs, enabled, nil
}

// build makes the beacon the spec describes.
func (s *Spec) build(env *env) (Beacon, error) {
	o := newOpts(s.own)
	b, err := modules[s.Module](o, env)
	if err == nil {
		err = o.done()
		if err != nil && b != nil {
			if c, ok := b.(interface{ Close() error }); ok {
				c.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("beacon %s: %w", s.Name, err)
	}
	return b, nil
}
