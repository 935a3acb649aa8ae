package targets

import (
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// benchFleet builds n minions with grains shaped like a camera fleet's.
func benchFleet(n int) []*Minion {
	oses := []string{"Debian", "Ubuntu", "Buildroot", "OpenWrt"}
	models := []string{"cam-x100", "cam-x200", "sensor-t1", "gw-2"}
	out := make([]*Minion, n)
	for i := range out {
		out[i] = &Minion{
			ID: fmt.Sprintf("site%03d-dev%05d", i%500, i),
			Grains: map[string]any{
				"id":           fmt.Sprintf("site%03d-dev%05d", i%500, i),
				"os":           oses[i%len(oses)],
				"kernel":       "Linux",
				"cpuarch":      "armv7l",
				"num_cpus":     1 + i%4,
				"model":        models[(i/3)%len(models)],
				"site":         fmt.Sprintf("site%03d", i%500),
				"roles":        []any{"camera", fmt.Sprintf("zone-%d", i%7)},
				"firmware":     map[string]any{"version": fmt.Sprintf("1.%d.%d", i%5, i%10), "channel": "stable"},
				"ipv4":         []any{"127.0.0.1", fmt.Sprintf("10.%d.%d.%d", i%200, (i/200)%250, 1+i%250)},
				"ipv6":         []any{"::1"},
				"osrelease":    "12",
				"virtual":      "physical",
				"manufacturer": "Acme",
				"serialnumber": fmt.Sprintf("SN%08d", i),
			},
		}
	}
	return out
}

// benchExpr is a 5-term compound: grain globs (nested, list-valued), a
// pcre on the id, a subnet, and a negation.
const benchExpr = "G@model:cam-x* and G@firmware:version:1.[0-2].* and not E@site00[0-4]- and ( G@roles:zone-3 or S@10.0.0.0/12 )"

// BenchmarkCompound compiles a 5-term compound target and matches it against
// 100,000 minions' grains. The goal: at most 400 ns per minion (40 ms
// per op), no allocation per match.
//
// grains=maps walks each minion's grain maps (what the agent and reactor
// do); grains=index matches the flattened form the master keeps (Index,
// built when a minion connects or sends new grains, so outside the timed
// loop; phase=index measures building it).
func BenchmarkCompound(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		benchCompound(b, n)
		benchCompoundIndex(b, n)
	}
}

// benchIndexed is what the master's registry holds for each minion: the
// id, the grains and their index.
func benchIndexed(fleet []*Minion) []*Minion {
	out := make([]*Minion, len(fleet))
	for i, mn := range fleet {
		out[i] = &Minion{ID: mn.ID, Grains: mn.Grains, Index: Index(mn.Grains)}
	}
	return out
}

func benchCompoundIndex(b *testing.B, n int) {
	fleet := benchFleet(n)
	minions := benchIndexed(fleet)
	size := 0
	for _, mn := range minions {
		size += mn.Index.Size()
	}
	b.Run(fmt.Sprintf("phase=compile+match/grains=index/minions=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		cpu0 := cpuTime()
		for b.Loop() {
			m, err := Compile(benchExpr, "compound", Options{})
			if err != nil {
				b.Fatal(err)
			}
			matched = 0
			for _, mn := range minions {
				if m.Match(mn) {
					matched++
				}
			}
		}
		perMinion(b, n, cpu0)
		b.ReportMetric(float64(matched), "matched")
		b.ReportMetric(float64(size)/float64(n), "index-B/minion")
	})
	b.Run(fmt.Sprintf("phase=match/grains=index/minions=%d", n), func(b *testing.B) {
		m, err := Compile(benchExpr, "compound", Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Match(minions[i])
			i++
			if i == n {
				i = 0
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/minion")
	})
	benchCompoundFleet(b, minions)
	if n != 1000 {
		return
	}
	b.Run("phase=index", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			Index(fleet[i].Grains)
			i++
			if i == n {
				i = 0
			}
		}
	})
}

// benchCompound runs BenchmarkCompound on n minions. At 100,000 minions the
// grains (one map per minion) no longer fit in cache and matching is bound by
// memory latency; the 1,000-minion run shows the cost of matching itself.
func benchCompound(b *testing.B, n int) {
	minions := benchFleet(n)
	b.Run(fmt.Sprintf("phase=compile+match/grains=maps/minions=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		cpu0 := cpuTime()
		for b.Loop() {
			m, err := Compile(benchExpr, "compound", Options{})
			if err != nil {
				b.Fatal(err)
			}
			matched = 0
			for _, mn := range minions {
				if m.Match(mn) {
					matched++
				}
			}
		}
		perMinion(b, n, cpu0)
		b.ReportMetric(float64(matched), "matched")
	})
	b.Run(fmt.Sprintf("phase=match/grains=maps/minions=%d", n), func(b *testing.B) {
		m, err := Compile(benchExpr, "compound", Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Match(minions[i])
			i++
			if i == n {
				i = 0
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/minion")
	})
}

// benchFleetOf builds the Fleet the master keeps of minions (built as
// grains arrive, so outside the timed loops).
func benchFleetOf(minions []*Minion) *Fleet {
	f := NewFleet()
	for _, mn := range minions {
		f.Set(mn.ID, NewFleetEntry(mn.Grains, mn.Index))
	}
	return f
}

// benchCompoundFleet matches benchExpr with the fleet's inverted index:
// phase=compile+match counts the matches, as the per-minion runs above do;
// phase=compile+select is the master's whole path (registry.match): the
// accepted ids in, the matched ids out, sorted, for the per-minion matcher
// (an id → grains map, as the registry's) and for the fleet.
func benchCompoundFleet(b *testing.B, minions []*Minion) {
	n := len(minions)
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	f := benchFleetOf(minions)
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	fleetBytes := float64(ms1.HeapAlloc-ms0.HeapAlloc) / float64(n)
	b.Run(fmt.Sprintf("phase=compile+match/grains=fleet/minions=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		cpu0 := cpuTime()
		for b.Loop() {
			m, err := Compile(benchExpr, "compound", Options{})
			if err != nil {
				b.Fatal(err)
			}
			matched = f.Count(m)
		}
		perMinion(b, n, cpu0)
		b.ReportMetric(float64(matched), "matched")
		b.ReportMetric(float64(f.Values())/float64(n), "values/minion")
		b.ReportMetric(fleetBytes, "fleet-B/minion")
	})
	ids := make([]string, n)
	byID := make(map[string]*Minion, n)
	for i, mn := range minions {
		ids[i] = mn.ID
		byID[mn.ID] = mn
	}
	b.Run(fmt.Sprintf("phase=compile+select/grains=index/minions=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		cpu0 := cpuTime()
		for b.Loop() {
			m, err := Compile(benchExpr, "compound", Options{})
			if err != nil {
				b.Fatal(err)
			}
			out := make([]string, 0, n)
			for _, id := range ids {
				if m.Match(byID[id]) {
					out = append(out, id)
				}
			}
			slices.Sort(out)
			matched = len(out)
		}
		perMinion(b, n, cpu0)
		b.ReportMetric(float64(matched), "matched")
	})
	b.Run(fmt.Sprintf("phase=compile+select/grains=fleet/minions=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		matched := 0
		cpu0 := cpuTime()
		for b.Loop() {
			m, err := Compile(benchExpr, "compound", Options{})
			if err != nil {
				b.Fatal(err)
			}
			matched = len(f.Select(m, ids))
		}
		perMinion(b, n, cpu0)
		b.ReportMetric(float64(matched), "matched")
	})
}

// cpuTime is the process's CPU time so far (user and system, the garbage
// collector's included): on a shared machine it moves less than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perMinion reports the wall and CPU time per minion of the b.N matches
// over n minions since cpu0.
func perMinion(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/minion")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/minion")
}
