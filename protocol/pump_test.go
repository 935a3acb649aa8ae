package protocol

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// pumpPair is a real QUIC connection on loopback with n streams the client
// opened (each has sent one byte-free open frame) and the server accepted.
func pumpPair(t *testing.T, ctx context.Context, n int) (client []*quic.Stream, server []*quic.Stream) {
	t.Helper()
	master, _ := GenerateIdentity()
	agent, _ := GenerateIdentity()
	qc := QUICConfig()
	qc.MaxIncomingStreams = int64(n) // QUICConfig allows an agent's few
	ln := listenQUICWith(t, master, qc)
	accepted := make(chan *quic.Conn, 1)
	go func() {
		conn, err := ln.Accept(ctx)
		if err != nil {
			close(accepted)
			return
		}
		accepted <- conn
	}()
	conn, err := quic.DialAddr(ctx, ln.Addr().String(), agent.ClientTLS(func(ed25519.PublicKey) error { return nil }), QUICConfig())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	sconn := <-accepted
	if sconn == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { sconn.CloseWithError(0, "") })
	for i := range n {
		st, err := conn.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A stream is seen by the peer once it carries something.
		if err := NewStreamFramer(st, 0).WriteFrame([]byte(fmt.Sprintf("open %d", i))); err != nil {
			t.Fatal(err)
		}
		client = append(client, st)
		ss, err := sconn.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		server = append(server, ss)
	}
	return client, server
}

// TestPumpFrames: frames come in order, one handle at a time, on
// goroutines that exist only while there is something to read — a
// thousand idle pumped streams hold none — and the stream's end (FIN)
// reaches end as io.EOF.
func TestPumpFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const streams, frames = 200, 50
	client, server := pumpPair(t, ctx, streams)
	// Workers end as soon as they are idle: the count below is of pumps.
	pumpWorkerIdleTest.Store(int64(time.Millisecond))
	defer pumpWorkerIdleTest.Store(0)

	base := runtime.NumGoroutine()
	var mu sync.Mutex
	got := make([][]string, streams)
	ended := make(chan error, streams)
	busy := make([]int32, streams)
	for i, s := range server {
		StartPump(s, NewStreamFramer(s, 0), func(b []byte) bool {
			mu.Lock()
			busy[i]++
			if busy[i] != 1 {
				t.Errorf("stream %d: two handles at once", i)
			}
			got[i] = append(got[i], string(b))
			busy[i]--
			mu.Unlock()
			return true
		}, func(err error) { ended <- err })
	}
	// Idle, each stream read up to its first frame: no pump goroutine
	// stays (a parked reader each would be 200).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base+10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base+10 {
		t.Fatalf("%d goroutines for %d idle pumped streams (%d before)", n, streams, base)
	}
	for k := range frames {
		for i, c := range client {
			if err := NewStreamFramer(c, 0).WriteFrame([]byte(fmt.Sprintf("%d:%d", i, k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range client {
		c.Close()
	}
	for range streams {
		select {
		case err := <-ended:
			if !errors.Is(err, io.EOF) {
				t.Errorf("end: %v, want EOF", err)
			}
		case <-ctx.Done():
			t.Fatal("not every pump ended")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range got {
		want := []string{fmt.Sprintf("open %d", i)}
		for k := range frames {
			want = append(want, fmt.Sprintf("%d:%d", i, k))
		}
		if strings.Join(got[i], ",") != strings.Join(want, ",") {
			t.Fatalf("stream %d: got %v\nwant %v", i, got[i], want)
		}
	}
}

// TestPumpStops: handle returning false stops the reading (end(nil), no
// frame after it); cancelling the reading from outside wakes an idle pump
// with the cancellation; a frame over the limit ends it with KindTooLarge.
func TestPumpStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, server := pumpPair(t, ctx, 3)

	// 0: handle says stop at "stop".
	var seen []string
	end0 := make(chan error, 1)
	StartPump(server[0], NewStreamFramer(server[0], 0), func(b []byte) bool {
		seen = append(seen, string(b))
		return string(b) != "stop"
	}, func(err error) { end0 <- err })
	f0 := NewStreamFramer(client[0], 0)
	for _, m := range []string{"a", "stop", "after"} {
		f0.WriteFrame([]byte(m))
	}
	if err := <-end0; err != nil {
		t.Errorf("stopped by handle: end(%v), want nil", err)
	}
	if strings.Join(seen, ",") != "open 0,a,stop" {
		t.Errorf("handled %v, want open 0,a,stop", seen)
	}

	// 1: cancelled while idle.
	end1 := make(chan error, 1)
	StartPump(server[1], NewStreamFramer(server[1], 0), func([]byte) bool { return true }, func(err error) { end1 <- err })
	time.Sleep(50 * time.Millisecond)
	server[1].CancelRead(7)
	select {
	case err := <-end1:
		var se *quic.StreamError
		if !errors.As(err, &se) || se.ErrorCode != 7 {
			t.Errorf("cancelled: end(%v), want stream error 7", err)
		}
	case <-ctx.Done():
		t.Fatal("a cancelled idle pump did not end")
	}

	// 2: a frame over the stream's limit.
	end2 := make(chan error, 1)
	StartPump(server[2], NewStreamFramer(server[2], MinMaxFrameLimit), func([]byte) bool { return true }, func(err error) { end2 <- err })
	big := AppendFrame(nil, make([]byte, MinMaxFrameLimit+1))
	client[2].Write(big[:4])
	select {
	case err := <-end2:
		if KindOf(err) != KindTooLarge {
			t.Errorf("oversized frame: end(%v), want KindTooLarge", err)
		}
	case <-ctx.Done():
		t.Fatal("an oversized frame did not end the pump")
	}
}

// TestPumpWorkersReused: pumps that wake one after another are run by the
// worker the previous one finished on, not by a new goroutine each (whose
// small stack decoding would grow, a copy each time).
func TestPumpWorkersReused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const streams = 30
	client, server := pumpPair(t, ctx, streams)
	handled := make(chan string, 1)
	for _, s := range server {
		StartPump(s, NewStreamFramer(s, 0), func(b []byte) bool {
			if !strings.HasPrefix(string(b), "open") {
				handled <- string(b)
			}
			return true
		}, func(error) {})
	}
	time.Sleep(100 * time.Millisecond) // the open frames handled
	started := pumpWorkersStarted.Load()
	for i, c := range client {
		want := fmt.Sprintf("frame %d", i)
		if err := NewStreamFramer(c, 0).WriteFrame([]byte(want)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-handled:
			if got != want {
				t.Fatalf("handled %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("%s not handled", want)
		}
		time.Sleep(2 * time.Millisecond) // the worker back to waiting
	}
	if n := pumpWorkersStarted.Load() - started; n > 3 {
		t.Errorf("%d workers started for %d pumps woken one after another, want the same one or two", n, streams)
	}
}

// TestWirePump: StartWirePump hands each whole frame, length first, as
// AppendFrame makes it, in order, small and past one read chunk.
func TestWirePump(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client, server := pumpPair(t, ctx, 1)
	// pumpPair's "open 0" first.
	bodies := [][]byte{[]byte("open 0"), []byte("a"), bytes.Repeat([]byte("b"), frameChunk+100), []byte("return")}
	got := make(chan []byte, len(bodies))
	ended := make(chan error, 1)
	StartWirePump(server[0], NewStreamFramer(server[0], 0), func(wire []byte) bool {
		got <- wire
		return true
	}, func(err error) { ended <- err })
	w := NewStreamFramer(client[0], 0)
	for _, b := range bodies[1:] {
		if err := w.WriteFrame(b); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range bodies {
		select {
		case wire := <-got:
			if !bytes.Equal(wire, AppendFrame(nil, b)) {
				t.Fatalf("frame %d: %d bytes, want the %d of AppendFrame", i, len(wire), 4+len(b))
			}
		case err := <-ended:
			t.Fatalf("pump ended before frame %d: %v", i, err)
		case <-ctx.Done():
			t.Fatalf("frame %d never came", i)
		}
	}
}
