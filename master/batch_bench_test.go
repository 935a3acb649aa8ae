package master

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
)

// BenchmarkRelayReturns handles one job's returns from 1000 devices behind
// a relay, as they arrive from it (frames, MAC-tagged with each device's
// session key), until all are stored, announced and acknowledged:
//
//   - path=batch: one Batch on the link's control stream (handleBatch);
//   - path=handle: the same frames handled one after the other by one
//     goroutine (what a control stream reader calling handle for each
//     item would cost: a job cache commit per return);
//   - path=streams: one goroutine per device, as when each device's
//     stream carries its own return (the relays of capability 5).
//
// The network is left out: see tools/fleet for the whole path.
func BenchmarkRelayReturns(b *testing.B) {
	const devices = 1000
	for _, path := range []string{"batch", "handle", "streams"} {
		b.Run(fmt.Sprintf("path=%s/returns=%d", path, devices), func(b *testing.B) {
			m := startMasterB(b, func(c *config.Master) { c.AutoAccept = true })
			l, sessions := benchLink(b, m, devices)
			ctx := context.Background()
			base := time.Now()
			var size int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				jid := jobcache.JIDAt(base.Add(time.Duration(i) * time.Millisecond))
				batch := &protocol.Batch{Items: make([]protocol.BatchItem, devices)}
				for j, s := range sessions {
					ret, err := protocol.MACReturn(s.mac, &protocol.ReturnBody{ID: s.id, JID: jid, Fun: "test.ping",
						Return: true, Success: true, Stamp: "2026-11-23T18:00:00.000000"})
					if err != nil {
						b.Fatal(err)
					}
					ret.Seq = uint64(i + 1)
					frame, err := protocol.Encode(ret)
					if err != nil {
						b.Fatal(err)
					}
					batch.Items[j] = protocol.BatchItem{ID: s.id, Stream: uint64(s.streamID), Frame: frame}
					size += int64(len(frame))
				}
				b.StartTimer()
				switch path {
				case "batch":
					m.handleBatch(l, batch)
				case "handle":
					for j, it := range batch.Items {
						benchHandle(ctx, b, m, sessions[j], it.Frame)
					}
				case "streams":
					var wg sync.WaitGroup
					for j, it := range batch.Items {
						wg.Add(1)
						go func() {
							defer wg.Done()
							benchHandle(ctx, b, m, sessions[j], it.Frame)
						}()
					}
					wg.Wait()
				}
			}
			b.StopTimer()
			for _, s := range sessions {
				if got := s.toAck.Load(); got != uint64(b.N) || s.isClosed() {
					b.Fatalf("%s: acknowledged up to %d (closed %v), want %d", s.id, got, s.isClosed(), b.N)
				}
			}
			b.SetBytes(size / int64(b.N))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*devices), "ns/return")
		})
	}
}

func benchHandle(ctx context.Context, b *testing.B, m *Master, s *session, frame []byte) {
	msg, err := protocol.Decode(frame)
	if err == nil {
		err = m.handle(ctx, s, msg)
	}
	if err != nil {
		b.Error(err)
	}
}

// benchLink makes a relay link with n accepted devices whose sessions
// have MAC keys, as serveRelayed leaves them (without their streams: the
// returns' path does not write to them).
func benchLink(b testing.TB, m *Master, n int) (*relayLink, []*session) {
	b.Helper()
	log := zap.NewNop()
	l := &relayLink{id: "r1", ctrl: &session{id: "r1", log: log, done: make(chan struct{})}, devices: make(map[string]*session)}
	sessions := make([]*session, n)
	for i := range sessions {
		id, err := protocol.GenerateIdentity()
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("dev%05d", i)
		if dec, err := m.keys.Check(name, id.Pub, ""); err != nil || dec.Status != protocol.KeyAccepted {
			b.Fatalf("key of %s: %+v, %v", name, dec, err)
		}
		mac := make([]byte, 32)
		rand.Read(mac)
		s := &session{id: name, pub: id.Pub, mac: mac, log: log, done: make(chan struct{}),
			relay: l, streamID: quic.StreamID(4 * (i + 1))}
		sessions[i] = s
		l.devices[name] = s
	}
	return l, sessions
}
