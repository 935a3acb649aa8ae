// The relay: section's parser is built where the relay is (see
// cmd/halite-agent/relay.go): the 32-bit ARM and MIPS agents have no relay
// unless built with -tags relay, and no room for what they cannot use.

//go:build relay || !(arm || mips || mipsle)

package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// relayOptions is the relay: section's option table.
func relayOptions() map[string]*option[Relay] {
	type R = Relay
	return table([]option[R]{
		optStr("interface", func(r *R) *string { return &r.Interface }, "address to listen on for devices"),
		optPort("port", func(r *R) *int { return &r.Port }, "UDP port for devices"),
		optRange("max_devices", 1, MaxRelayDevices, func(r *R) *int { return &r.MaxDevices }, "devices served at once"),
		optCount("spool_max", func(r *R) *int { return &r.SpoolMax }, "bytes of returns and events held while the master is away (cachedir/relay-spool)"),
		optRange("event_rate", 1, 1<<20, func(r *R) *int { return &r.EventRate }, "returns and events a second per device"),
		optRange("event_burst", 1, 1<<20, func(r *R) *int { return &r.EventBurst }, "burst of returns and events per device"),
		optCount("heartbeat", func(r *R) *int { return &r.Heartbeat }, "seconds between heartbeat events; 0: off"),
		optRange("admit", 1, 1<<20, func(r *R) *int { return &r.Admit }, "devices let in a second (handshakes and upstream sessions)"),
		optRange("batch_max", MinRelayBatch, MaxRelayBatch, func(r *R) *int { return &r.BatchMax }, "bytes of one batch of returns and events to the master"),
		optRange("batch_delay", 0, MaxRelayBatchDelay, func(r *R) *int { return &r.BatchDelay }, "milliseconds a batch waits for more after its first item"),
		optStr("chunk_cache_dir", func(r *R) *string { return &r.ChunkCacheDir }, "directory of the cache of file chunks by hash (default cachedir/relay-chunks)"),
		optCount("chunk_cache_bytes", func(r *R) *int { return &r.ChunkCacheBytes }, "bytes of file chunks cached on disk, least recently used dropped first; 0: off"),
	})
}

// RelayOptions documents the relay: section's options, in name order.
func RelayOptions() []OptionDoc { return docs(relayOptions(), DefaultRelay()) }

// relay parses the relay: mapping; `relay: {}` is a relay with every
// default.
func (v value) relay(dst **Relay) error {
	n := v.node()
	r := DefaultRelay()
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("expected a mapping of relay options, got %s", describe(n))
	}
	opts := relayOptions()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		o, ok := opts[k.Value]
		if k.Kind != yaml.ScalarNode || !ok {
			names := make([]string, 0, len(opts))
			for _, d := range docs(opts, r) {
				names = append(names, d.Name)
			}
			return &atLine{k.Line, fmt.Sprintf("unknown relay option %s (known: %s)", describe(k), strings.Join(names, ", "))}
		}
		if isNull(val) {
			continue
		}
		if err := o.set(r, value{n: val}); err != nil {
			return &atLine{k.Line, fmt.Sprintf("%s: %v", k.Value, err)}
		}
	}
	*dst = r
	return nil
}
