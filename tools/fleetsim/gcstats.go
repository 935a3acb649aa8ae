package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/metrics"
	"syscall"
	"time"
)

// What each process allocated and collected during the rounds: a
// collection that falls in a round is what makes it the slowest, and on a
// machine whose speed drifts the bytes allocated per device and round are
// a steadier figure than times. The children (relays, master, API client)
// write theirs when sent SIGUSR1, into FLEETSIM_STATS_DIR.

// gcStats is a process's allocation and collector totals so far.
type gcStats struct {
	AllocBytes uint64  `json:"alloc_bytes"` // heap allocated, all told
	Cycles     uint64  `json:"cycles"`      // collections finished
	GCCPU      float64 `json:"gc_cpu_s"`    // the collector's CPU (estimate), seconds
}

// gcDelta is gcStats over the rounds, per round: what -json reports for
// each process.
type gcDelta struct {
	AllocMiB float64 `json:"alloc_mib_per_round"`
	Cycles   float64 `json:"gc_cycles_per_round"`
	GCCPUMS  float64 `json:"gc_cpu_ms_per_round"`
}

func (a gcStats) per(b gcStats, rounds float64) gcDelta {
	return gcDelta{AllocMiB: float64(b.AllocBytes-a.AllocBytes) / (1 << 20) / rounds,
		Cycles: float64(b.Cycles-a.Cycles) / rounds, GCCPUMS: (b.GCCPU - a.GCCPU) * 1000 / rounds}
}

var gcSamples = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/cpu/classes/gc/total:cpu-seconds"}}

func readGCStats() gcStats {
	s := make([]metrics.Sample, len(gcSamples))
	copy(s, gcSamples)
	metrics.Read(s)
	return gcStats{AllocBytes: s[0].Value.Uint64(), Cycles: s[1].Value.Uint64(), GCCPU: s[2].Value.Float64()}
}

const statsDirEnv = "FLEETSIM_STATS_DIR"

func statsFile(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("gcstats-%d.json", pid))
}

// serveGCStats, in a child whose parent set FLEETSIM_STATS_DIR, writes the
// child's gcStats there each time it gets SIGUSR1.
func serveGCStats() {
	dir := os.Getenv(statsDirEnv)
	if dir == "" {
		return
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR1)
	go func() {
		for range c {
			b, _ := json.Marshal(readGCStats())
			tmp := statsFile(dir, os.Getpid()) + ".tmp"
			if os.WriteFile(tmp, b, 0o600) == nil {
				os.Rename(tmp, statsFile(dir, os.Getpid()))
			}
		}
	}()
}

// askGCStats asks the child pid for its gcStats (serveGCStats) and waits
// up to 5 s for them.
func askGCStats(dir string, pid int) (gcStats, error) {
	f := statsFile(dir, pid)
	os.Remove(f)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return gcStats{}, err
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		var s gcStats
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		return s, err
	}
	return gcStats{}, fmt.Errorf("process %d wrote no collector figures in 5 s", pid)
}
