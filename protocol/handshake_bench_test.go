package protocol

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// BenchmarkHandshake times a device's connection to a relay as it is made
// in a reconnect storm: QUIC and TLS 1.3 with Halite's configurations on
// loopback, both ends in this process, one stream and a one-byte round
// trip (by which the session ticket has arrived). resume=true dials with
// a session cache, so every handshake after the first resumes; kx picks
// the key exchange the listener prefers (mlkem: X25519MLKEM768, Go's
// default; x25519: classical only). cpu-µs/op is the process's user and
// system CPU per connection, both ends together.
func BenchmarkHandshake(b *testing.B) {
	for _, kx := range []string{"mlkem", "x25519"} {
		for _, resume := range []bool{false, true} {
			name := "kx=" + kx + "/resume=false"
			if resume {
				name = "kx=" + kx + "/resume=true"
			}
			b.Run(name, func(b *testing.B) { benchHandshake(b, kx, resume) })
		}
	}
}

func benchHandshake(b *testing.B, kx string, resume bool) {
	server, err := GenerateIdentity()
	if err != nil {
		b.Fatal(err)
	}
	client, err := GenerateIdentity()
	if err != nil {
		b.Fatal(err)
	}
	stc := server.ServerTLS()
	if kx == "x25519" {
		stc.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	tr := &quic.Transport{Conn: udp}
	defer udp.Close()
	defer tr.Close()
	ln, err := tr.Listen(stc, QUICConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				st, err := conn.AcceptStream(ctx)
				if err != nil {
					return
				}
				var one [1]byte
				if _, err := st.Read(one[:]); err == nil {
					st.Write(one[:])
				}
				<-conn.Context().Done()
			}()
		}
	}()
	cudp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	ctr := &quic.Transport{Conn: cudp}
	defer cudp.Close()
	defer ctr.Close()
	ctc := client.ClientTLS(nil)
	if resume {
		ctc.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	}
	dial := func() bool {
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		conn, err := ctr.Dial(dctx, ln.Addr(), ctc, QUICConfig())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.CloseWithError(0, "")
		st, err := conn.OpenStreamSync(dctx)
		if err != nil {
			b.Fatal(err)
		}
		var one [1]byte
		if _, err := st.Write(one[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Read(one[:]); err != nil {
			b.Fatal(err)
		}
		return conn.ConnectionState().TLS.DidResume
	}
	dial() // the first: a full handshake, and the ticket
	cpu0 := cpuTime()
	b.ResetTimer()
	resumed := 0
	for range b.N {
		if dial() {
			resumed++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	if want := map[bool]int{false: 0, true: b.N}[resume]; resumed != want {
		b.Fatalf("%d of %d handshakes resumed, want %d", resumed, b.N, want)
	}
	cancel()
	ln.Close()
	<-done
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
