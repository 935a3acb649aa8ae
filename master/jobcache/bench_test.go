package jobcache

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/halite-fleet/halite/protocol"
)

// BenchmarkSaveReturn measures durable returns per second with writers
// goroutines calling SaveReturn at once, as the master's connections do.
func BenchmarkSaveReturn(b *testing.B) {
	for _, writers := range []int{1, 64, 512} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := openCache(b, filepath.Join(b.TempDir(), "jobs.db"))
			defer c.Close()
			runWriters(b, writers, c.SaveReturn)
		})
	}
}

// BenchmarkBoltBatch is the reference SaveReturn's group commit is measured
// against: the same writes through bbolt's DB.Batch (default 10 ms delay,
// 1000 per batch).
func BenchmarkBoltBatch(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := openCache(b, filepath.Join(b.TempDir(), "jobs.db"))
			defer c.Close()
			runWriters(b, writers, func(r *protocol.ReturnBody) error {
				val, err := protocol.Marshal(r)
				if err != nil {
					return err
				}
				key := returnKey(r.JID, r.ID)
				return c.db.Batch(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bucketReturns)
					if bk.Get(key) != nil {
						return nil
					}
					return bk.Put(key, val)
				})
			})
		})
	}
}

func runWriters(b *testing.B, writers int, save func(*protocol.ReturnBody) error) {
	jid := JIDAt(time.Now())
	ret := newReturn(jid, "x")
	if enc, err := protocol.Marshal(ret); err == nil {
		b.SetBytes(int64(len(enc)))
	}
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				r := *ret
				r.ID = fmt.Sprintf("agent%07d", i)
				if err := save(&r); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "returns/s")
}

// BenchmarkSaveReturnsNew measures durable returns per second saved in
// batches of size returns (a relay's batch), one caller at a time.
func BenchmarkSaveReturnsNew(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c := openCache(b, filepath.Join(b.TempDir(), "jobs.db"))
			defer c.Close()
			jid := JIDAt(time.Now())
			rs := make([]*protocol.ReturnBody, size)
			b.ReportAllocs()
			start := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for j := range rs {
					rs[j] = newReturn(jid, fmt.Sprintf("agent%07d", i*size+j))
				}
				_, errs := c.SaveReturnsNew(rs, nil)
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "returns/s")
		})
	}
}

// BenchmarkFleetRounds is the master's job cache in fleetsim's rounds: jobs
// of 10,000 returns each, arriving in no order of id (devices answer when
// they answer) in batches of 20 from 10 callers at once (ten relays' batches).
// Each b.N is one return.
func BenchmarkFleetRounds(b *testing.B) {
	const devices, batch, callers = 10000, 20, 10
	c := openCache(b, filepath.Join(b.TempDir(), "jobs.db"))
	defer c.Close()
	ids := make([]string, devices)
	for i := range ids {
		ids[i] = fmt.Sprintf("cam-%05d.site%02d", i, i%50)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	start := time.Now()
	b.ResetTimer()
	for done, t := 0, time.Now(); done < b.N; t = t.Add(time.Second) {
		jid := JIDAt(t)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		n := min(devices, b.N-done)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs := make([]*protocol.ReturnBody, 0, batch)
				for {
					from := int(next.Add(batch)) - batch
					if from >= n {
						return
					}
					rs = rs[:0]
					for _, id := range ids[from:min(from+batch, n)] {
						rs = append(rs, newReturn(jid, id))
					}
					_, errs := c.SaveReturnsNew(rs, nil)
					for _, err := range errs {
						if err != nil {
							b.Error(err)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "returns/s")
}
