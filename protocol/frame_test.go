package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// rw joins a reader and a writer into the io.ReadWriter a Framer wants.
type rw struct {
	io.Reader
	io.Writer
}

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// headerOnly serves a frame header and fails the test if anything past it
// is read: a Framer must refuse an oversized frame from its header alone.
type headerOnly struct {
	t    *testing.T
	hdr  []byte
	done bool
}

func (h *headerOnly) Read(p []byte) (int, error) {
	if h.done {
		h.t.Errorf("frame body read after an oversized header")
		return 0, errors.New("body read")
	}
	h.done = true
	return copy(p, h.hdr), nil
}

// framers are the ways to make a Framer: each reads the same frames.
var framers = []struct {
	name string
	new  func(io.ReadWriter, int) *Framer
}{{"buffered", NewFramer}, {"stream", NewStreamFramer}}

func TestFrameRoundTrip(t *testing.T) {
	for _, fr := range framers {
		t.Run(fr.name, func(t *testing.T) { testFrameRoundTrip(t, fr.new) })
	}
}

func testFrameRoundTrip(t *testing.T, newFramer func(io.ReadWriter, int) *Framer) {
	var buf bytes.Buffer
	f := newFramer(&buf, 0)
	msgs := []Message{
		&Hello{ID: "web01", Version: "1", Caps: CapabilityVersion},
		&KeyStatus{Status: KeyAccepted, Caps: 1},
		&Ping{Seq: 7},
		&Grains{Grains: map[string]any{"big": string(bytes.Repeat([]byte("x"), 300<<10))}},
		&Pong{Seq: 7},
	}
	for _, m := range msgs {
		if err := f.Write(m); err != nil {
			t.Fatalf("Write(%T): %v", m, err)
		}
	}
	// Read back through a reader that returns short reads, so a body is
	// assembled from many pieces.
	r := newFramer(rw{iotest.HalfReader(&buf), io.Discard}, 0)
	for _, want := range msgs {
		got, err := r.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Read differs (-want +got):\n%s", diff)
		}
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("ReadFrame at end: got %v, want io.EOF", err)
	}
}

func TestFrameLimit(t *testing.T) {
	const limit = 4 << 10
	t.Run("read over limit", func(t *testing.T) {
		for _, n := range []uint32{limit + 1, DefaultMaxFrame + 1, 1<<32 - 1} {
			f := NewFramer(rw{&headerOnly{t: t, hdr: header(n)}, io.Discard}, limit)
			_, err := f.ReadFrame()
			wantKind(t, err, KindTooLarge)
		}
	})
	t.Run("read at limit", func(t *testing.T) {
		body := append([]byte{byte(TypePing)}, make([]byte, limit-1)...)
		f := NewFramer(rw{bytes.NewReader(append(header(limit), body...)), io.Discard}, limit)
		got, err := f.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("ReadFrame: got %d bytes, want the %d written", len(got), len(body))
		}
	})
	t.Run("write over limit", func(t *testing.T) {
		var buf bytes.Buffer
		f := NewFramer(&buf, limit)
		wantKind(t, f.WriteFrame(make([]byte, limit+1)), KindTooLarge)
		if buf.Len() != 0 {
			t.Errorf("WriteFrame over the limit wrote %d bytes, want 0", buf.Len())
		}
		if err := f.WriteFrame(make([]byte, limit)); err != nil {
			t.Errorf("WriteFrame at the limit: got %v, want success", err)
		}
	})
	t.Run("read over a lower limit for one frame", func(t *testing.T) {
		for _, tc := range []struct {
			n, framer, one int
			kind           Kind // KindOther: read
		}{
			{n: MaxHelloFrame + 1, framer: DefaultMaxFrame, one: MaxHelloFrame, kind: KindTooLarge},
			{n: 3_900_000, framer: DefaultMaxFrame, one: MaxHelloFrame, kind: KindTooLarge},
			{n: MaxHelloFrame, framer: DefaultMaxFrame, one: MaxHelloFrame},
			// A larger limit for one frame does not raise the Framer's.
			{n: limit + 1, framer: limit, one: DefaultMaxFrame, kind: KindTooLarge},
		} {
			if tc.kind == KindTooLarge {
				f := NewFramer(rw{&headerOnly{t: t, hdr: header(uint32(tc.n))}, io.Discard}, tc.framer)
				_, err := f.ReadFrameMax(tc.one)
				wantKind(t, err, KindTooLarge)
				continue
			}
			body := append([]byte{byte(TypePing)}, make([]byte, tc.n-1)...)
			f := NewFramer(rw{bytes.NewReader(append(append(header(uint32(tc.n)), body...), append(header(uint32(tc.n)), body...)...)), io.Discard}, tc.framer)
			if got, err := f.ReadFrameMax(tc.one); err != nil || len(got) != tc.n {
				t.Errorf("ReadFrameMax(%d) of %d bytes: got %d bytes, %v; want them all", tc.one, tc.n, len(got), err)
			}
			// The next frame has the Framer's limit again.
			if got, err := f.ReadFrame(); err != nil || len(got) != tc.n {
				t.Errorf("ReadFrame after ReadFrameMax: got %d bytes, %v; want %d", len(got), err, tc.n)
			}
		}
	})
	t.Run("smallest limit", func(t *testing.T) {
		// A limit under MinMaxFrameLimit is raised to it.
		var buf bytes.Buffer
		f := NewFramer(&buf, 10)
		if err := f.WriteFrame(make([]byte, MinMaxFrameLimit)); err != nil {
			t.Errorf("WriteFrame(%d) with limit 10: got %v, want success", MinMaxFrameLimit, err)
		}
		wantKind(t, f.WriteFrame(make([]byte, MinMaxFrameLimit+1)), KindTooLarge)
	})
}

// TestFrameAnnouncedNotSent checks that a frame announced at the limit but
// never sent does not make the reader allocate the announced size.
func TestFrameAnnouncedNotSent(t *testing.T) {
	in := append(header(DefaultMaxFrame), 1, 2, 3)
	var before, after runtime.MemStats
	const runs = 10
	runtime.ReadMemStats(&before)
	for range runs {
		f := NewFramer(rw{bytes.NewReader(in), io.Discard}, 0)
		if _, err := f.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("ReadFrame: got %v, want io.ErrUnexpectedEOF", err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 256<<10 {
		t.Errorf("ReadFrame of a truncated %d-byte frame allocated %d bytes, want at most 256 KiB", DefaultMaxFrame, per)
	}
}

func TestFrameReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		kind    Kind
		wantErr error
	}{
		{"empty frame", header(0), KindMalformed, nil},
		{"clean end", nil, KindOther, io.EOF},
		{"truncated header", []byte{0, 0}, KindOther, io.ErrUnexpectedEOF},
		{"truncated body", append(header(10), 1, 2, 3), KindOther, io.ErrUnexpectedEOF},
		{"header then nothing", header(10), KindOther, io.ErrUnexpectedEOF},
	} {
		for _, fr := range framers {
			t.Run(tc.name+"/"+fr.name, func(t *testing.T) {
				f := fr.new(rw{bytes.NewReader(tc.in), io.Discard}, 0)
				b, err := f.ReadFrame()
				if err == nil {
					t.Fatalf("ReadFrame = %x, want error", b)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("ReadFrame: got %v, want %v", err, tc.wantErr)
				}
				if got := KindOf(err); got != tc.kind {
					t.Errorf("ReadFrame: got kind %v (%v), want %v", got, err, tc.kind)
				}
			})
		}
	}
	var buf bytes.Buffer
	wantKind(t, NewFramer(&buf, 0).WriteFrame(nil), KindMalformed)
}

// TestFrameUnknownType checks that an unknown message type is a typed error
// and that the stream stays in step: the next frame reads fine.
func TestFrameUnknownType(t *testing.T) {
	var buf bytes.Buffer
	f := NewFramer(&buf, 0)
	if err := f.WriteFrame([]byte{99, 0xa0}); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(&Ping{Seq: 3}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Read()
	wantKind(t, err, KindUnknownType)
	m, err := f.Read()
	if err != nil {
		t.Fatalf("Read after unknown type: %v", err)
	}
	if diff := cmp.Diff(&Ping{Seq: 3}, m); diff != "" {
		t.Errorf("Read after unknown type (-want +got):\n%s", diff)
	}
}

// choppyWriter stores what is written, a few bytes at a time with a yield
// between, so that unsynchronised writers would interleave.
type choppyWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *choppyWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += 3 {
		w.mu.Lock()
		w.buf.Write(p[i:min(i+3, len(p))])
		w.mu.Unlock()
		runtime.Gosched()
	}
	return len(p), nil
}

func TestFrameConcurrentWriters(t *testing.T) {
	const writers, frames = 8, 200
	w := &choppyWriter{}
	f := NewFramer(rw{eofReader{}, w}, 0)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			for j := range frames {
				body := fmt.Appendf(nil, "writer %d frame %d %s", i, j, bytes.Repeat([]byte{byte('a' + i)}, j))
				if err := f.WriteFrame(body); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("WriteFrame: %v", err)
	}
	r := NewFramer(rw{&w.buf, io.Discard}, 0)
	next := make([]int, writers)
	for range writers * frames {
		b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v", err)
		}
		var i, j int
		var fill string
		if _, err := fmt.Sscanf(string(b), "writer %d frame %d %s", &i, &j, &fill); err != nil && j != 0 {
			t.Fatalf("frame %q does not parse: %v", b, err)
		}
		if i < 0 || i >= writers || j != next[i] {
			t.Fatalf("frame %q: got writer %d frame %d, want frame %d of that writer", b[:min(len(b), 40)], i, j, next[i])
		}
		if want := string(bytes.Repeat([]byte{byte('a' + i)}, j)); fill != want {
			t.Fatalf("frame %d of writer %d is mixed with another: got %q", j, i, fill)
		}
		next[i]++
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Errorf("ReadFrame after all frames: got %v, want io.EOF", err)
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// TestFramerWriteAllocs: Write builds the frame in a pooled buffer, so a
// return written to a stream costs the writer no buffer of its own (it
// cost three: the encoding, the type byte's copy, the frame's copy). The
// relay writes one batch and the agent one return per job this way.
func TestFramerWriteAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items; make test runs this without -race")
	}
	f := NewStreamFramer(rw{eofReader{}, io.Discard}, 0)
	ret := &Return{Signed: Signed{Body: bytes.Repeat([]byte("r"), 300), Sig: bytes.Repeat([]byte("s"), 32)}, Seq: 7}
	if err := f.Write(ret); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { f.Write(ret) }); n > 0 {
		t.Errorf("Framer.Write: %.1f allocations a frame, want 0", n)
	}
	body := bytes.Repeat([]byte("b"), 300)
	if n := testing.AllocsPerRun(200, func() { f.WriteFrame(body) }); n > 0 {
		t.Errorf("Framer.WriteFrame: %.1f allocations a frame, want 0", n)
	}
}

// keepingWriter keeps what it is given without copying and fails: a
// writer that may still hold p when it returns an error.
type keepingWriter struct{ kept [][]byte }

func (w *keepingWriter) Write(p []byte) (int, error) {
	w.kept = append(w.kept, p)
	return 0, errors.New("kept")
}

// TestFramerWriteFailedKeepsBuffer: a buffer whose write failed is not
// given back to the pool, so what a failing writer still holds is never
// overwritten by the next frame.
func TestFramerWriteFailedKeepsBuffer(t *testing.T) {
	kw := &keepingWriter{}
	bad := NewStreamFramer(rw{eofReader{}, kw}, 0)
	good := NewStreamFramer(rw{eofReader{}, io.Discard}, 0)
	if err := bad.Write(&Ping{Seq: 1}); err == nil {
		t.Fatal("Write to a failing writer: no error")
	}
	want := append([]byte(nil), kw.kept[0]...)
	for i := range 100 {
		good.Write(&Ping{Seq: uint64(1000 + i)})
		good.WriteFrame(bytes.Repeat([]byte{byte(i)}, 40))
	}
	if !bytes.Equal(kw.kept[0], want) {
		t.Errorf("a failed write's buffer was reused: %x, was %x", kw.kept[0], want)
	}
}

// TestFramerWriteRoundTrip: frames of every size up to past the pool's
// bound, written from pooled buffers one after another, read back whole.
func TestFramerWriteRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewFramer(rw{eofReader{}, &buf}, 0)
	var sizes []int
	for n := 1; n < 3*maxPooledWrite; n = n*2 + 1 {
		sizes = append(sizes, n, 3)
	}
	for i, n := range sizes {
		if err := w.Write(&BlobData{Req: uint64(i), Data: bytes.Repeat([]byte{byte(i)}, n)}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewFramer(rw{&buf, io.Discard}, 0)
	for i, n := range sizes {
		m, err := r.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		d, ok := m.(*BlobData)
		if !ok || d.Req != uint64(i) || !bytes.Equal(d.Data, bytes.Repeat([]byte{byte(i)}, n)) {
			t.Fatalf("frame %d of %d bytes came back as %T %+v", i, n, m, m)
		}
	}
}
