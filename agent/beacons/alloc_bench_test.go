package beacons

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCheck: one check of each beacon on this machine, as the
// beaconbench agent runs them (allocations are what a 1 s interval costs
// the agent's heap).
func BenchmarkCheck(b *testing.B) {
	for _, c := range []struct{ name, conf string }{
		{"memusage", "[{percent: 0%}]"},
		{"diskusage", "[{/: 0%}]"},
		{"load", "[{interval: 1}]"},
		{"swapusage", "[{percent: 0%}]"},
		{"status", "[{interval: 1}]"},
		{"ps", "[{processes: {init: running}}]"},
		{"network_info", "[{interfaces: {lo: {}}}]"},
	} {
		b.Run("beacon="+c.name, func(b *testing.B) {
			var v any
			v = yamlValueB(b, c.conf)
			s, err := ParseSpec(c.name, v, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			bc, err := s.build(defaultEnv())
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := bc.Check(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
