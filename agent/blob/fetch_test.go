package blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// source serves the chunks of data by hash, as the master's index does.
type source struct {
	chunks map[[32]byte][]byte
	asked  atomic.Int64
}

func newSource(t *testing.T, n int) (*source, []byte, protocol.Manifest) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	m, err := protocol.NewManifest(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := &source{chunks: make(map[[32]byte][]byte)}
	for i, h := range m.Chunks {
		s.chunks[[32]byte(h)] = data[i*protocol.ChunkSize : i*protocol.ChunkSize+m.ChunkLen(i)]
	}
	return s, data, m
}

func (s *source) get(ctx context.Context, h []byte) ([]byte, error) {
	s.asked.Add(1)
	b, ok := s.chunks[[32]byte(h)]
	if !ok {
		return nil, ErrNotServed
	}
	return append([]byte(nil), b...), nil
}

func fetch(t *testing.T, c *Client, m protocol.Manifest, dst string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Fetch(ctx, m, dst)
}

func TestFetch(t *testing.T) {
	for _, n := range []int{0, 1, protocol.ChunkSize, 7*protocol.ChunkSize + 3} {
		s, data, m := newSource(t, n)
		dst := filepath.Join(t.TempDir(), "f")
		if err := fetch(t, &Client{Get: s.get}, m, dst); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: content differs (%v)", n, err)
		}
		if _, err := os.Stat(dst + ".part"); !os.IsNotExist(err) {
			t.Errorf("%d bytes: the .part is left: %v", n, err)
		}
	}
}

// TestFetchResumes: a fetch cut short keeps what it wrote; the next asks
// only for the rest. A damaged chunk in the .part is fetched again.
func TestFetchResumes(t *testing.T) {
	s, data, m := newSource(t, 6*protocol.ChunkSize+10)
	dst := filepath.Join(t.TempDir(), "f")
	// Cut: the source fails after 3 chunks until the context ends.
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	cut := func(ctx context.Context, h []byte) ([]byte, error) {
		if n.Add(1) > 3 {
			cancel()
			return nil, errors.New("link down")
		}
		return s.get(ctx, h)
	}
	if err := (&Client{Get: cut, InFlight: 1}).Fetch(ctx, m, dst); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut fetch: got %v, want context.Canceled", err)
	}
	// Damage chunk 1 of the part.
	f, err := os.OpenFile(dst+".part", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("xx"), protocol.ChunkSize+5)
	f.Close()
	s.asked.Store(0)
	if err := fetch(t, &Client{Get: s.get}, m, dst); err != nil {
		t.Fatal(err)
	}
	if got, want := s.asked.Load(), int64(len(m.Chunks)-2); got != want {
		t.Errorf("resumed fetch asked for %d chunks, want %d (chunks 0 and 2 kept)", got, want)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("content differs after resume")
	}
}

// TestFetchRefuses: a chunk that keeps coming altered, or is not served,
// fails the fetch and never reaches dst; one altered once is asked again.
func TestFetchRefuses(t *testing.T) {
	s, data, m := newSource(t, 3*protocol.ChunkSize)
	dir := t.TempDir()
	dst := filepath.Join(dir, "f")
	os.WriteFile(dst, []byte("old"), 0o644)
	tamper := func(ctx context.Context, h []byte) ([]byte, error) {
		b, err := s.get(ctx, h)
		if err == nil && bytes.Equal(h, m.Chunks[1]) {
			b[0] ^= 1
		}
		return b, err
	}
	if err := fetch(t, &Client{Get: tamper, Retry: time.Millisecond}, m, dst); !errors.Is(err, ErrTampered) {
		t.Fatalf("tampered: got %v, want ErrTampered", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "old" {
		t.Fatalf("dst changed by a refused fetch: %q", got)
	}
	var once sync.Once
	flaky := func(ctx context.Context, h []byte) ([]byte, error) {
		b, err := s.get(ctx, h)
		once.Do(func() { b = b[:10] })
		return b, err
	}
	if err := fetch(t, &Client{Get: flaky, Retry: time.Millisecond}, m, dst); err != nil {
		t.Fatalf("altered once: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
		t.Fatal("content differs")
	}
	gone := m
	gone.Chunks = append([][]byte(nil), m.Chunks...)
	h := sha256.Sum256([]byte("nobody has it"))
	gone.Chunks[2] = h[:]
	if err := fetch(t, &Client{Get: s.get}, gone, filepath.Join(dir, "g")); !errors.Is(err, ErrNotServed) {
		t.Fatalf("not served: got %v, want ErrNotServed", err)
	}
	bad := m
	bad.Chunks = bad.Chunks[:1]
	if err := fetch(t, &Client{Get: s.get}, bad, filepath.Join(dir, "h")); err == nil {
		t.Fatal("an invalid manifest was fetched")
	}
}
