package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/halite-fleet/halite/master/api"
)

// -orch (with -states' setup: the master in its own process, simulated
// devices running the agent's executor and state engine): times
// `halite-run state.orchestrate orch.bench`, three steps over every
// device, run on the master (master/orch):
//
//	ping:  salt.function test.ping on sim-*
//	apply: salt.state sls app0,app1 on sim-* (compiled per device on the
//	       master), require ping
//	check: salt.function test.echo on sim-*, require apply
//
// Each round's wall time is from the runner request on the master's local
// socket to its answer; a round whose orchestration did not succeed on
// every device is an error.

var orchMode = new(bool)

const orchBench = `ping:
  salt.function:
    - name: test.ping
    - tgt: 'sim-*'
    - timeout: 120

apply:
  salt.state:
    - tgt: 'sim-*'
    - sls:
      - app0
      - app1
    - timeout: 120
    - require:
      - salt: ping

check:
  salt.function:
    - name: test.echo
    - tgt: 'sim-*'
    - arg:
      - done
    - timeout: 120
    - require:
      - salt: apply
`

func writeOrch(srv string) error {
	if err := os.MkdirAll(filepath.Join(srv, "orch"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(srv, "orch", "bench.sls"), []byte(orchBench), 0o644)
}

// orchRound runs the orchestration once and checks that its three steps
// succeeded and named all n devices.
func orchRound(ctx context.Context, sock string, n int) (time.Duration, error) {
	start := time.Now()
	res, err := api.Call(ctx, sock, &api.Request{Op: api.OpRunner, Fun: "state.orchestrate", Arg: []any{"orch.bench"}})
	d := time.Since(start)
	if err != nil {
		return d, err
	}
	top, _ := res.(map[string]any)
	data, _ := top["data"].(map[string]any)
	if len(data) != 1 {
		return d, fmt.Errorf("orchestrate returned %v", short(res))
	}
	for _, running := range data {
		steps, ok := running.(map[string]any)
		if !ok || len(steps) != 3 {
			return d, fmt.Errorf("orchestrate ran %v", short(running))
		}
		for tag, s := range steps {
			st, _ := s.(map[string]any)
			if st["result"] != true {
				return d, fmt.Errorf("step %s: %v", tag, short(st["comment"]))
			}
			ch, _ := st["changes"].(map[string]any)
			if ret, ok := ch["ret"].(map[string]any); ok && len(ret) != n {
				return d, fmt.Errorf("step %s: %d devices in its changes, want %d", tag, len(ret), n)
			}
		}
	}
	if rc, _ := top["retcode"].(uint64); rc != 0 {
		return d, fmt.Errorf("orchestrate retcode %d", rc)
	}
	return d, nil
}

// orchRounds runs warmup+rounds orchestrations and fills rep's times.
func orchRounds(ctx context.Context, sock string, n, rounds, warmup int, rep *stateReport) error {
	var times []time.Duration
	for i := 0; i < warmup+rounds; i++ {
		d, err := orchRound(ctx, sock, n)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if i == 0 {
			rep.FirstRoundMS = ms(d)
		}
		if *phases {
			fmt.Fprintf(os.Stderr, "fleetsim: orchestrate round %d: %s\n", i, round(d))
		}
		if i >= warmup {
			times = append(times, d)
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	rep.Rounds = len(times)
	rep.P50MS, rep.P99MS, rep.MinMS, rep.MaxMS = ms(pct(times, 50)), ms(pct(times, 99)), ms(times[0]), ms(times[len(times)-1])
	return nil
}

// orchHeader is the table -orch prints under.
func orchHeader(rounds, warmup int) {
	fmt.Printf("fleetsim -orch: %d rounds after %d warm-up; state.orchestrate of 3 steps (test.ping; state.sls app0,app1; test.echo) over every device\n", rounds, warmup)
	fmt.Println("| devices | relays | wall time p50 | p99 | min | max | first (cold) | CPU per round: master | relays | devices + API client | load avg |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
}

func orchRow(rep *stateReport) {
	fmt.Printf("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.1f |\n", rep.Devices, rep.Relays,
		fmtMS(rep.P50MS), fmtMS(rep.P99MS), fmtMS(rep.MinMS), fmtMS(rep.MaxMS), fmtMS(rep.FirstRoundMS),
		fmtMS(rep.MasterCPUMS), fmtMS(rep.RelayCPUMS), fmtMS(rep.SimCPUMS), rep.LoadAvg)
}
