package fleet

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

// blobWaits are a simulated agent's BlobGets waiting for their answers.
type blobWaits struct {
	mu   sync.Mutex
	next uint64
	wait map[uint64]chan *protocol.BlobData // nil answer: the session ended
}

func (w *blobWaits) reply(d *protocol.BlobData) {
	w.mu.Lock()
	ch := w.wait[d.Req]
	delete(w.wait, d.Req)
	w.mu.Unlock()
	if ch != nil {
		ch <- d
	}
}

func (w *blobWaits) lost() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for req, ch := range w.wait {
		delete(w.wait, req)
		ch <- nil
	}
}

// Fetch has agent i fetch the file m names by chunks on its session, as
// the agent's Fetcher does (agent/blob): inFlight chunks asked at a time,
// each checked against its hash, asked again after a session ends or a
// busy answer, until ctx ends. The bytes are counted, not kept.
func (f *Fleet) Fetch(ctx context.Context, i int, m protocol.Manifest, inFlight int) error {
	a := f.agents[i]
	next := make(chan int)
	errs := make(chan error, inFlight)
	var wg sync.WaitGroup
	for w := 0; w < inFlight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				if err := f.chunk(ctx, a, m, c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for c := range m.Chunks {
		select {
		case next <- c:
		case err = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func (f *Fleet) chunk(ctx context.Context, a *simAgent, m protocol.Manifest, c int) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		fr := a.fr.Load()
		if fr == nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		ch := make(chan *protocol.BlobData, 1)
		a.blobs.mu.Lock()
		if a.blobs.wait == nil {
			a.blobs.wait = map[uint64]chan *protocol.BlobData{}
		}
		a.blobs.next++
		req := a.blobs.next
		a.blobs.wait[req] = ch
		a.blobs.mu.Unlock()
		if err := fr.Write(&protocol.BlobGet{Req: req, Hash: m.Chunks[c]}); err != nil {
			a.blobs.mu.Lock()
			delete(a.blobs.wait, req)
			a.blobs.mu.Unlock()
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		var d *protocol.BlobData
		select {
		case d = <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case d == nil:
			continue // the session ended: ask on the next one
		case strings.HasPrefix(d.Err, protocol.BlobErrUnknown):
			return errors.New(d.Err)
		case d.Err != "":
			f.noteErr(errors.New("chunk: " + d.Err))
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		if s := sha256.Sum256(d.Data); len(d.Data) != m.ChunkLen(c) || string(s[:]) != string(m.Chunks[c]) {
			return fmt.Errorf("chunk %d of %s does not match its hash", c, a.id)
		}
		return nil
	}
}
