package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/tools/fleet"
)

// measureFetch (-fetch MiB): n simulated devices behind r real relays (in
// this process) fetch one file of size MiB by chunks from the master (in
// this process), all at once, each asking 4 chunks at a time as the
// agent's Fetcher does and checking every chunk. It reports the wall time
// until the last device has the whole file, and what crossed each relay's
// upstream link: the chunk bytes the relays fetched from the master.
func measureFetch(n, r, mib int, asJSON bool) error {
	root, err := os.MkdirTemp("", "fleetsim")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	opts := fleet.Options{N: n, Seed: "fleetsim"}
	if err := fleet.PreAccept(filepath.Join(root, "pki"), opts); err != nil {
		return err
	}
	m, err := fleet.StartMaster(root, func(c *config.Master) { c.RelayAllow = []string{"relay-*"} })
	if err != nil {
		return err
	}
	defer m.Stop()
	file := filepath.Join(root, "firmware.bin")
	data := make([]byte, mib<<20)
	rand.Read(data)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	man, err := m.Blobs().Add(file)
	if err != nil {
		return err
	}
	rs, err := fleet.StartRelays(root, m.Addr().String(), r, (n+r-1)/r, 0, nil)
	if err != nil {
		return err
	}
	defer rs.Stop()
	f, err := fleet.Start("", fleet.Options{N: n, Seed: opts.Seed, MasterFP: m.Fingerprint(), Addrs: rs.Addrs()})
	if err != nil {
		return err
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := waitConnected(ctx, f, n, time.Now()); err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	var done []time.Duration
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f.Fetch(ctx, i, man, 4)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			done = append(done, time.Since(start))
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	var up, misses, hits, shared uint64
	for _, rl := range rs.Relays {
		st := rl.Stats()
		up += st.ChunkUpBytes
		misses += st.ChunkMisses
		hits += st.ChunkHits
		shared += st.ChunkShared
	}
	served := int64(n) * man.Size
	res := map[string]any{
		"devices": n, "relays": r, "file_bytes": man.Size, "chunks": len(man.Chunks),
		"wall_s": wall.Seconds(), "upstream_bytes": up, "served_bytes": served,
		"upstream_per_file": float64(up) / float64(man.Size), "chunks_from_master": misses,
		"chunks_from_cache": hits, "chunks_from_shared_fetch": shared,
		"device_mib_s": float64(served) / (1 << 20) / wall.Seconds(), "gomaxprocs": runtime.GOMAXPROCS(0),
		"errors": f.Errors(),
	}
	if asJSON {
		return json.NewEncoder(os.Stdout).Encode(res)
	}
	fmt.Printf("| %d | %d | %d MiB (%d chunks) | %.1f s | %.1f MiB (%.2f× the file) | %.0f MiB | %d / %d / %d |\n",
		n, r, mib, len(man.Chunks), wall.Seconds(), float64(up)/(1<<20), float64(up)/float64(man.Size),
		float64(served)/(1<<20), misses, shared, hits)
	return nil
}
