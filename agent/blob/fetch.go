package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// Fetcher writes the file m names to dst.
type Fetcher interface {
	Fetch(ctx context.Context, m protocol.Manifest, dst string) error
}

// Getter asks for one chunk by its SHA-256 and returns what came, not yet
// checked. An error wrapping ErrNotServed is final (nobody upstream serves
// the chunk); any other is tried again.
type Getter func(ctx context.Context, hash []byte) ([]byte, error)

// ErrNotServed says that the master serves no file holding a chunk (the
// file changed or went since the job was made).
var ErrNotServed = errors.New("chunk not served")

// ErrTampered says that chunks came that did not match their hashes, more
// than once for one chunk: something between the master and the device
// alters them.
var ErrTampered = errors.New("chunk does not match its hash")

// Client is a Fetcher over a Getter.
type Client struct {
	Get Getter
	// InFlight is how many chunks are asked for at once (default 4).
	InFlight int
	// Retry is the first pause after a failed ask, doubled up to 5 s
	// (default 200 ms).
	Retry time.Duration
}

// maxBad is how many times one chunk may come altered before Fetch gives
// up: once may be a damaged cache, again is tampering.
const maxBad = 3

// Fetch writes the file m names to dst: chunks go into dst+".part", those
// already there and matching their hashes are kept (a fetch cut short
// resumes), every chunk is checked as it comes, then the whole file; the
// part is synced and renamed over dst. A chunk that cannot be had now is
// asked for again, across reconnects, until ctx ends.
func (c *Client) Fetch(ctx context.Context, m protocol.Manifest, dst string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if c.Get == nil {
		return errors.New("fetch: no way to ask for chunks")
	}
	part := dst + ".part"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	defer f.Close()
	todo, err := missing(f, m)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if err := f.Truncate(m.Size); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if err := c.fetchChunks(ctx, f, m, todo); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	whole := sha256.New()
	if _, err := io.Copy(whole, io.NewSectionReader(f, 0, m.Size)); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if !bytes.Equal(whole.Sum(nil), m.SHA256) {
		// Every chunk matched: the manifest itself is inconsistent.
		os.Remove(part)
		return fmt.Errorf("fetch %s: the file's SHA-256 is not the manifest's", dst)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if err := os.Rename(part, dst); err != nil {
		return fmt.Errorf("fetch %s: %w", dst, err)
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// missing returns the chunks of m that f does not hold yet.
func missing(f *os.File, m protocol.Manifest) ([]int, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	have := st.Size()
	var todo []int
	buf := make([]byte, protocol.ChunkSize)
	for i, h := range m.Chunks {
		off, n := int64(i)*protocol.ChunkSize, m.ChunkLen(i)
		if off+int64(n) <= have {
			if _, err := f.ReadAt(buf[:n], off); err == nil {
				if s := sha256.Sum256(buf[:n]); bytes.Equal(s[:], h) {
					continue
				}
			}
		}
		todo = append(todo, i)
	}
	return todo, nil
}

// fetchChunks fetches the chunks todo into f, InFlight at a time.
func (c *Client) fetchChunks(ctx context.Context, f *os.File, m protocol.Manifest, todo []int) error {
	if len(todo) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := c.InFlight
	if n <= 0 {
		n = 4
	}
	next := make(chan int)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	for w := 0; w < min(n, len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				b, err := c.chunk(ctx, m, i)
				if err == nil {
					_, err = f.WriteAt(b, int64(i)*protocol.ChunkSize)
				}
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
feed:
	for _, i := range todo {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// chunk asks for chunk i of m until it comes right, ctx ends, or it is
// not served or comes altered maxBad times.
func (c *Client) chunk(ctx context.Context, m protocol.Manifest, i int) ([]byte, error) {
	pause := c.Retry
	if pause <= 0 {
		pause = 200 * time.Millisecond
	}
	bad := 0
	for {
		b, err := c.Get(ctx, m.Chunks[i])
		if err == nil {
			if s := sha256.Sum256(b); len(b) == m.ChunkLen(i) && bytes.Equal(s[:], m.Chunks[i]) {
				return b, nil
			}
			if bad++; bad >= maxBad {
				return nil, fmt.Errorf("chunk %d: %w (%d times)", i, ErrTampered, bad)
			}
		} else if errors.Is(err, ErrNotServed) {
			return nil, fmt.Errorf("chunk %d: %w", i, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
		pause = min(2*pause, 5*time.Second)
	}
}
