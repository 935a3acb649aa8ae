package master

import (
	"sync"
	"testing"

	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// BenchmarkRequestDecodeNewGoroutine decodes an event.send request (what
// procbench -reactor sends, one connection each) on a new goroutine, as
// serveAPI does, with and without growStack first: without it, most of
// the time is the runtime growing the stack by copying it.
func BenchmarkRequestDecodeNewGoroutine(b *testing.B) {
	enc, err := protocol.Marshal(&api.Request{Op: api.OpRunner, Fun: "event.send",
		Arg: []any{"bench/ping", map[string]any{"id": "a0003", "seq": 17, "round": 2}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, grow := range []bool{false, true} {
		name := "stack=default"
		if grow {
			name = "stack=grown"
		}
		b.Run(name, func(b *testing.B) {
			var wg sync.WaitGroup
			for b.Loop() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if grow {
						growStack(0)
					}
					var r api.Request
					if err := protocol.Unmarshal(enc, &r); err != nil {
						panic(err)
					}
				}()
				wg.Wait()
			}
		})
	}
}
