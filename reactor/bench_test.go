package reactor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/render"
)

// BenchmarkMatch100Globs matches tags against 100 reactor globs of the
// shapes people write (goal: 1,000,000 events/s on one core).
func BenchmarkMatch100Globs(b *testing.B) {
	var rules []Rule
	for i := range 25 {
		rules = append(rules,
			Rule{Tag: fmt.Sprintf("salt/minion/site%d-*/start", i)},
			Rule{Tag: fmt.Sprintf("salt/beacon/*/diskusage%d/*", i)},
			Rule{Tag: fmt.Sprintf("myco/app%d/*", i)},
			Rule{Tag: fmt.Sprintf("halite/relay/*/device/*/found%d", i)})
	}
	m := newMatcher(rules)
	tags := []string{"salt/job/20261122101010123456/ret/cam1", "salt/minion/site7-cam3/start",
		"salt/beacon/cam9/diskusage3/", "myco/app12/deploy", "salt/auth", "halite/relay/r1/device/aa:bb/found3"}
	var dst []int
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst = m.match(tags[i%len(tags)], dst[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRenderDispatch renders a typical Jinja reaction file and
// dispatches its reaction through the engine's workers (goal: 20,000
// reactions/s).
func BenchmarkRenderDispatch(b *testing.B) {
	for _, workers := range []int{1, 10} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			dir := b.TempDir()
			f := filepath.Join(dir, "r.sls")
			os.WriteFile(f, []byte(`{% if data['act'] == 'accept' and data['id'].startswith('web') %}
add_new_minion_to_pool:
  local.state.apply:
    - tgt: 'haproxy*'
    - args:
      - mods: haproxy.refresh_pool
      - pillar:
          new_minion: {{ data['id'] }}
          event: {{ data|json }}
{% endif %}
`), 0o644)
			var n atomic.Int64
			done := make(chan struct{})
			target := int64(b.N)
			e := New(Options{Rules: []Rule{{Tag: "salt/key", Files: []string{f}}}, Renderer: render.New(render.Options{}),
				Types: []string{TypeLocal}, Workers: workers, Queue: b.N + 1,
				Dispatch: func(context.Context, *Reaction) (string, error) {
					if n.Add(1) == target {
						close(done)
					}
					return "", nil
				}})
			bus := event.NewBus(zap.NewNop())
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- e.Run(ctx, bus) }()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Submit(event.Event{Tag: "salt/key", Data: map[string]any{"id": fmt.Sprintf("web%d", i), "act": "accept"}})
			}
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatalf("only %d of %d reactions ran", n.Load(), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reactions/s")
			cancel()
			<-ran
			bus.Close()
		})
	}
}
