package master

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	goredis "github.com/redis/go-redis/v9"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/returners/rettest"
)

// benchEventReturn publishes b.N events on a master whose event_return is
// name and reports the events per second until the backend holds them
// all, and the bus's publish latency (p50, p99) meanwhile.
func benchEventReturn(b *testing.B, name string, setup func(c *config.Master), count func() int) {
	tm := startMasterB(b, func(c *config.Master) {
		c.EventReturn = []string{name}
		c.EventReturnWhitelist = []string{"bench/*"}
		setup(c)
	})
	data := map[string]any{"id": "web1", "fun": "test.ping", "return": true, "n": 1}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; i < b.N; i++ {
		// Keep the backlog under the subscription's queue: the bus drops
		// for a reader that is that far behind, by design.
		if i%10000 == 0 {
			for i-count() > 40000 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		t0 := time.Now()
		tm.bus.Publish(fmt.Sprintf("bench/%d", i), data)
		lat = append(lat, time.Since(t0))
	}
	for count() < b.N {
		if time.Now().After(deadline) {
			b.Fatalf("backend holds %d of %d events", count(), b.N)
		}
		time.Sleep(2 * time.Millisecond)
	}
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/el.Seconds(), "events/s")
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "publish-p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "publish-p99-ns")
	if d := tm.bus.Stats(); d.Dropped > 0 {
		b.Logf("bus dropped %d events (all subscriptions; the event returner got every one)", d.Dropped)
	}
}

// BenchmarkBusPublishIdle is the bus's publish latency with no event
// returner, for comparison.
func BenchmarkBusPublishIdle(b *testing.B) {
	tm := startMasterB(b, func(*config.Master) {})
	sub := tm.bus.Subscribe("*", 1<<16) // one reader, as event_return has
	go func() {
		for range sub.C() {
		}
	}()
	defer sub.Close()
	data := map[string]any{"id": "web1", "fun": "test.ping", "return": true, "n": 1}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		tm.bus.Publish(fmt.Sprintf("bench/%d", i), data)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "publish-p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "publish-p99-ns")
}

func BenchmarkEventReturnRedis(b *testing.B) {
	prefix := "halite-bench-" + rettest.Unique() + ":"
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	defer rdb.Del(context.Background(), prefix+"salt_events")
	benchEventReturn(b, "redis", func(c *config.Master) {
		c.Raw["redis.host"] = "127.0.0.1"
		c.Raw["redis.key_prefix"] = prefix
	}, func() int {
		n, _ := rdb.XLen(context.Background(), prefix+"salt_events").Result()
		return int(n)
	})
}

func BenchmarkEventReturnPgjsonb(b *testing.B) {
	db, pg := pgTestDB(b)
	benchEventReturn(b, "pgjsonb", func(c *config.Master) {
		for k, v := range map[string]any{"returner.pgjsonb.host": "127.0.0.1", "returner.pgjsonb.user": "postgres",
			"returner.pgjsonb.pass": "", "returner.pgjsonb.db": db, "returner.pgjsonb.sslmode": "disable"} {
			c.Raw[k] = v
		}
	}, func() int {
		var n int
		pg.QueryRow(context.Background(), "SELECT count(*) FROM salt_events").Scan(&n)
		return n
	})
}

// startMasterB runs a master for a benchmark (no listening agents needed).
func startMasterB(b *testing.B, setup func(*config.Master)) *Master {
	b.Helper()
	dir := b.TempDir()
	cfg := config.DefaultMaster()
	cfg.RootDir, cfg.Interface, cfg.Port = dir, "127.0.0.1", 0
	cfg.PkiDir, cfg.CacheDir = filepath.Join(dir, "pki"), filepath.Join(dir, "cache")
	cfg.SockDir = filepath.Join(dir, "s")
	cfg.ID = "benchmaster"
	setup(cfg)
	m, err := New(cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	<-m.Ready()
	return m
}

// BenchmarkReturnPgjsonb1000 is a job of 1000 agents with --return
// pgjsonb: 1000 returns arrive at once (one goroutine each, as 1000
// sessions) and the time until all 1000 rows are in salt_returns is
// reported. The agents' network path is left out (see fleetsim for it).
func BenchmarkReturnPgjsonb1000(b *testing.B) {
	db, pg := pgTestDB(b)
	tm := startMasterB(b, func(c *config.Master) {
		for k, v := range map[string]any{"returner.pgjsonb.host": "127.0.0.1", "returner.pgjsonb.user": "postgres",
			"returner.pgjsonb.pass": "", "returner.pgjsonb.db": db, "returner.pgjsonb.sslmode": "disable"} {
			c.Raw[k] = v
		}
	})
	for i := 0; i < b.N; i++ {
		jid := tm.jids.Next()
		load := &jobcache.Load{JID: jid, Tgt: "*", TgtType: "glob", Fun: "test.ping", Ret: "pgjsonb", StartTime: time.Now()}
		if err := tm.cache.SaveLoad(load); err != nil {
			b.Fatal(err)
		}
		tm.returners.JobPublished(load)
		start := time.Now()
		var wg sync.WaitGroup
		for a := range 1000 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tm.handleReturn(&session{}, 0, &protocol.ReturnBody{ID: fmt.Sprintf("agent%04d", a), JID: jid, Fun: "test.ping",
					Return: true, Success: true, Stamp: "2026-01-01T00:00:00.000000"}, nil)
			}()
		}
		wg.Wait()
		for {
			var n int
			pg.QueryRow(context.Background(), "SELECT count(*) FROM salt_returns WHERE jid=$1", jid).Scan(&n)
			if n == 1000 {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("%d of 1000 rows after a minute", n)
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-to-1000-rows")
	}
}
