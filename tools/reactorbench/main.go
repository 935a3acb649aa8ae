// Command reactorbench measures the reactor end to end, as the reactor
// issue defines it: a master in this process with one reactor rule
// (`bench/ping` → local.test.ping on the event's device, a Jinja reactor
// file), N simulated agents over real QUIC (package tools/fleet), then E
// events fired on the master's bus at a steady rate, each driving one job on
// one agent. It reports reactions completed per second (event fired to every
// return in) and the time from each event to its job being published
// (salt/job/<jid>/new), p50 and p99.
//
//	reactorbench [-agents 100] [-events 1000] [-rate 1000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/tools/fleet"
)

const reactorFile = `ping_device:
  local.test.ping:
    - tgt: {{ data['id'] }}
    - tgt_type: list
`

func main() {
	agents := flag.Int("agents", 100, "simulated agents")
	events := flag.Int("events", 1000, "events to fire")
	rate := flag.Int("rate", 1000, "events per second (0: as fast as possible)")
	flag.Parse()
	if err := run(*agents, *events, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "reactorbench:", err)
		os.Exit(1)
	}
}

func run(nAgents, nEvents, rate int) error {
	root, err := os.MkdirTemp("", "reactorbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	sls := filepath.Join(root, "ping.sls")
	if err := os.WriteFile(sls, []byte(reactorFile), 0o644); err != nil {
		return err
	}
	m, err := fleet.StartMaster(root, func(cfg *config.Master) {
		cfg.Reactor = []any{map[string]any{"bench/ping": []any{sls}}}
	})
	if err != nil {
		return err
	}
	defer m.Stop()
	ctx := context.Background()
	f, err := fleet.Start(m.Addr().String(), fleet.Options{N: nAgents, MasterFP: m.Fingerprint()})
	if err != nil {
		return err
	}
	defer f.Close()
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	err = f.WaitConnected(wctx, nAgents)
	wcancel()
	if err != nil {
		return err
	}
	ids := f.IDs()
	bus := m.Bus()
	news := bus.Subscribe("salt/job/*/new", nEvents+16)
	defer news.Close()
	rets := bus.Subscribe("salt/job/*/ret/*", nEvents+16)
	defer rets.Close()

	// Fire the events at the given rate; remember when each was fired.
	fired := make([]time.Time, nEvents)
	start := time.Now()
	var tick <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		tick = t.C
	}
	latencies := make([]time.Duration, 0, nEvents)
	returned := 0
	seen := 0
	deadline := time.After(2 * time.Minute)
	for i := 0; i < nEvents || returned < nEvents; {
		if i < nEvents {
			if tick != nil {
				select {
				case <-tick:
				case ev := <-news.C():
					latencies = append(latencies, matchNew(ev.Data, fired, &seen))
					continue
				case <-rets.C():
					returned++
					continue
				}
			}
			fired[i] = time.Now()
			bus.Publish("bench/ping", map[string]any{"id": ids[i%len(ids)], "seq": i})
			i++
			continue
		}
		select {
		case ev := <-news.C():
			latencies = append(latencies, matchNew(ev.Data, fired, &seen))
		case <-rets.C():
			returned++
		case <-deadline:
			return fmt.Errorf("%d of %d returns after 2 minutes", returned, nEvents)
		}
	}
	total := time.Since(start)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	st := m.ReactorEngine().Stats()
	fmt.Printf("| agents | events | rate | reactions/s (event → every return) | event → job published p50 | p99 | reactor overflow |\n")
	fmt.Printf("|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Printf("| %d | %d | %s | %.0f | %s | %s | %d |\n", nAgents, nEvents, rateText(rate),
		float64(nEvents)/total.Seconds(), pct(latencies, 50), pct(latencies, 99), st.Overflow)
	return nil
}

// matchNew returns the latency of the job a reaction published. Reactions
// are published in the order their events were fired (one rule, FIFO
// queue), so the k-th new job answers the k-th event; with several workers
// the order may differ slightly, which this approximation accepts.
func matchNew(data map[string]any, fired []time.Time, seen *int) time.Duration {
	k := *seen
	*seen = k + 1
	if k >= len(fired) || fired[k].IsZero() {
		return 0
	}
	return time.Since(fired[k])
}

func pct(sorted []time.Duration, p int) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := (p*len(sorted) + 99) / 100
	if i < 1 {
		i = 1
	}
	return fmt.Sprintf("%.2f ms", float64(sorted[i-1].Microseconds())/1000)
}

func rateText(r int) string {
	if r <= 0 {
		return "max"
	}
	return fmt.Sprintf("%d/s", r)
}
