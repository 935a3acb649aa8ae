package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/tools/fleet"
)

// measureRollout times `halite-run firmware.rollout 'sim-*' version=2.0.0`
// of the build at path (e.g. the armv7 agent of `make cross`) to n
// simulated devices behind relays, the master and the relays in this
// process: the rollout's time, each device's fetch, and what the relays
// fetched from the master (chunk bytes upstream) against what they served.
func measureRollout(n, relays int, path, batch string, asJSON bool) error {
	root, err := os.MkdirTemp("", "fleetsim-rollout")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fwDir := filepath.Join(root, "firmware")
	dst := filepath.Join(fwDir, "2.0.0", "linux-armv7", "halite-agent")
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		return err
	}
	opts := fleet.Options{N: n, Seed: "fleetsim"}
	if err := fleet.PreAccept(filepath.Join(root, "pki"), opts); err != nil {
		return err
	}
	m, err := fleet.StartMaster(root, func(c *config.Master) {
		c.FirmwareDir = fwDir
		c.RelayAllow = []string{"relay-*"}
	})
	if err != nil {
		return err
	}
	defer m.Stop()
	rs, err := fleet.StartRelays(root, m.Addr().String(), relays, (n+relays-1)/relays, 0, nil)
	if err != nil {
		return err
	}
	defer rs.Stop()
	start := time.Now()
	f, err := fleet.Start("", fleet.Options{N: n, Seed: opts.Seed, MasterFP: m.Fingerprint(), Addrs: rs.Addrs(), Firmware: true,
		Grains: map[string]any{"halite_platform": "linux-armv7", "halite_version": "1.0.0"}})
	if err != nil {
		return err
	}
	defer f.Close()
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = waitConnected(wctx, f, n, start)
	cancel()
	if err != nil {
		return err
	}
	cpu0 := cpuTime(os.Getpid())
	start = time.Now()
	c, err := api.Dial(ctx, m.Config.SocketPath(), &api.Request{Op: api.OpRunner, Fun: "firmware.rollout",
		Arg: []any{"sim-*"}, Kwarg: map[string]any{"version": "2.0.0", "batch": batch, "timeout": 600}})
	if err != nil {
		return err
	}
	defer c.Close()
	var res map[string]any
	for {
		r, err := c.Next()
		if err != nil {
			return err
		}
		if r.Kind == api.KindError {
			return errors.New(r.Error)
		}
		if r.Kind == api.KindResult {
			res, _ = r.Result.(map[string]any)
		}
		if r.Done {
			break
		}
	}
	took := time.Since(start)
	cpu := cpuTime(os.Getpid()) - cpu0
	var up, misses, hits uint64
	for _, r := range rs.Relays {
		st := r.Stats()
		up += st.ChunkUpBytes
		misses += st.ChunkMisses
		hits += st.ChunkHits
	}
	fetches := f.FetchTimes()
	sort.Slice(fetches, func(i, j int) bool { return fetches[i] < fetches[j] })
	out := map[string]any{
		"devices": n, "relays": relays, "build_bytes": len(b), "batch": batch,
		"seconds": took.Seconds(), "cpu_seconds": cpu.Seconds(),
		"updated": lenOf(res["updated"]), "failed": lenOf(res["failed"]), "timed_out": lenOf(res["timed_out"]),
		"batches": res["batches"], "upstream_chunk_bytes": up, "chunk_misses": misses, "chunk_hits": hits,
	}
	if len(fetches) > 0 {
		out["fetch_p50_ms"] = ms(fetches[len(fetches)/2])
		out["fetch_max_ms"] = ms(fetches[len(fetches)-1])
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(out)
	}
	fmt.Printf("rollout of a %d-byte build to %d devices behind %d relay(s), batch %s: %s (%d updated, %d failed, %d timed out, %v batches)\n",
		len(b), n, relays, batch, round(took), out["updated"], out["failed"], out["timed_out"], res["batches"])
	fmt.Printf("  upstream chunk bytes %d (%.2fx the build), chunks fetched upstream %d, served from the cache %d; process CPU %s\n",
		up, float64(up)/float64(len(b)), misses, hits, round(cpu))
	if len(fetches) > 0 {
		fmt.Printf("  per-device fetch p50 %s, max %s\n", round(fetches[len(fetches)/2]), round(fetches[len(fetches)-1]))
	}
	return nil
}

func lenOf(v any) int {
	l, _ := v.([]any)
	return len(l)
}
