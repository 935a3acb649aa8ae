package state

import (
	"context"
	"fmt"
	"testing"

	"github.com/halite-fleet/halite/state"
)

// BenchmarkApplyUnchanged is the agent applying 50 states that change
// nothing (test.succeed_without_changes), each requiring the one before:
// the engine's own cost per state run (the target is 50
// file.managed states in 50 ms; file.managed's own work is stfile's).
func BenchmarkApplyUnchanged(b *testing.B) {
	for _, n := range []int{50} {
		low := make([]state.Chunk, n)
		for i := range low {
			id := fmt.Sprintf("state%02d", i)
			c := state.Chunk{"state": "test", "fun": "succeed_without_changes", "__id__": id, "name": id,
				"__sls__": "bench", "__env__": "base", "order": 10000 + i}
			if i > 0 {
				c["require"] = []any{map[string]any{"test": fmt.Sprintf("state%02d", i-1)}}
			}
			low[i] = c
		}
		b.Run(fmt.Sprintf("states=%d", n), func(b *testing.B) {
			h := &testHost{id: "bench"}
			b.ReportAllocs()
			for b.Loop() {
				ret, err := Run(context.Background(), h, low, Options{})
				if err != nil || len(ret) != n {
					b.Fatalf("%d states, %v", len(ret), err)
				}
			}
		})
	}
}
