// The relay: section's parser is built where the relay is (see
// cmd/halite-agent/relay.go): the 32-bit ARM and MIPS agents have no relay
// unless built with -tags relay, and no room for what they cannot use.

//go:build relay || !(arm || mips || mipsle)

package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// relay parses the relay: mapping; `relay: {}` is a relay with every
// default.
func (v value) relay(dst **Relay) error {
	n := v.node()
	r := DefaultRelay()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of relay options, got %s", describe(n))
	}
	opts := map[string]func(value) error{
		"interface":   func(v value) error { return v.str(&r.Interface) },
		"port":        func(v value) error { return v.port(&r.Port) },
		"max_devices": func(v value) error { return positive(v, &r.MaxDevices, MaxRelayDevices) },
		"spool_max":   func(v value) error { return v.count(&r.SpoolMax) },
		"event_rate":  func(v value) error { return positive(v, &r.EventRate, 1<<20) },
		"event_burst": func(v value) error { return positive(v, &r.EventBurst, 1<<20) },
		"heartbeat":   func(v value) error { return v.count(&r.Heartbeat) },
		"admit":       func(v value) error { return positive(v, &r.Admit, 1<<20) },
		"batch_max":   func(v value) error { return between(v, &r.BatchMax, MinRelayBatch, MaxRelayBatch) },
		"batch_delay": func(v value) error { return between(v, &r.BatchDelay, 0, MaxRelayBatchDelay) },
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		set, ok := opts[k.Value]
		if k.Kind != yaml.ScalarNode || !ok {
			return &atLine{k.Line, fmt.Sprintf("unknown relay option %s (known: interface, port, max_devices, spool_max, event_rate, event_burst, heartbeat, admit, batch_max, batch_delay)", describe(k))}
		}
		if isNull(val) {
			continue
		}
		if err := set(value{n: val}); err != nil {
			return &atLine{k.Line, fmt.Sprintf("%s: %v", k.Value, err)}
		}
	}
	*dst = r
	return nil
}

func positive(v value, dst *int, max int) error { return between(v, dst, 1, max) }

func between(v value, dst *int, lo, hi int) error {
	i, err := v.integer()
	if err != nil {
		return err
	}
	if i < lo || i > hi {
		return fmt.Errorf("expected an integer from %d to %d, got %d", lo, hi, i)
	}
	*dst = i
	return nil
}
