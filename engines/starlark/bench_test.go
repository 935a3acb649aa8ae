package starlark

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
)

// BenchmarkCountingEngine: events published on a bus into a Starlark
// engine that counts them (on_event), through the real engine Manager.
// Events are published in rounds of 10,000, each round acknowledged by the
// engine, so no event is dropped for a full queue; events/s is the
// engine's sustained throughput. data=small is a beacon-like event of 3
// keys.
func BenchmarkCountingEngine(b *testing.B) {
	dir := b.TempDir()
	src := `
EVENTS = ["bench/*"]
state = {"n": 0}
def on_event(tag, data):
    state["n"] += 1
    if "ack" in data:
        event.fire("bench-ack", {"n": state["n"]})
`
	os.WriteFile(filepath.Join(dir, "count.star"), []byte(src), 0o644)
	bus := event.NewBus(nil)
	defer bus.Close()
	acks := bus.Subscribe("bench-ack", 16)
	m, err := engines.New(engines.Options{Config: []any{"count"}, Env: engines.Env{Role: "master", ID: "m", Bus: bus},
		Lookup: engines.UserDir{Dirs: []string{dir}, Script: Compile}.Lookup, Log: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for bus.Stats().Subscribers < 2 {
		if time.Now().After(deadline) {
			b.Fatal("the engine never subscribed")
		}
		time.Sleep(time.Millisecond)
	}
	const round = 10000
	data := map[string]any{"memusage": 81.5, "id": "cam1", "_stamp": "2026-11-23T15:00:00.000000"}
	ack := map[string]any{"ack": true, "_stamp": "2026-11-23T15:00:00.000000"}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	sent := 0
	for sent < b.N {
		n := min(round, b.N-sent)
		for i := 0; i < n-1; i++ {
			bus.Publish("bench/beacon", data)
		}
		bus.Publish("bench/beacon", ack)
		sent += n
		select {
		case <-acks.C():
		case <-time.After(60 * time.Second):
			b.Fatal("no ack from the engine")
		}
	}
	el := time.Since(start)
	b.StopTimer()
	if d := bus.Stats().Dropped; d != 0 {
		b.Fatalf("%d events dropped", d)
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
}
