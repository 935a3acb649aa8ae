package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/blob"
	"github.com/halite-fleet/halite/protocol"
)

// Chunks of files by hash (protocol.BlobGet): the agent asks its master,
// on its session (through its relay, which may answer from its cache), for
// one chunk at a time per request; blob.Client checks what comes and
// writes the file. A session that ends fails the asks waiting on it at
// once, so that the fetch asks again on the next session.

// blobGetTimeout bounds the wait for one chunk (a relay may itself wait up
// to 30 s for the master).
const blobGetTimeout = 40 * time.Second

type blobState struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]blobWait
}

type blobWait struct {
	ch chan *protocol.BlobData // nil data: the session ended
	l  *link
}

var errSessionEnded = errors.New("the session with the master ended")

// Fetcher returns the agent's Fetcher: files named by a manifest, fetched
// by chunk from the master (through the agent's relay).
func (a *Agent) Fetcher() blob.Fetcher { return &blob.Client{Get: a.getChunk} }

// getChunk asks the master for the chunk named hash and waits for it.
func (a *Agent) getChunk(ctx context.Context, hash []byte) ([]byte, error) {
	if a.masterless() {
		return nil, fmt.Errorf("this agent has no master to fetch from: %w", blob.ErrNotServed)
	}
	var l *link
	a.mine.mu.Lock()
	for _, k := range a.links {
		if a.mine.caps[k.out] >= protocol.CapBlob {
			l = k
			break
		}
	}
	a.mine.mu.Unlock()
	if l == nil || a.nconn.Load() == 0 {
		return nil, errors.New("no master connected that serves chunks")
	}
	ch := make(chan *protocol.BlobData, 1)
	a.blob.mu.Lock()
	if a.blob.waiting == nil {
		a.blob.waiting = make(map[uint64]blobWait)
	}
	a.blob.next++
	req := a.blob.next
	a.blob.waiting[req] = blobWait{ch, l}
	a.blob.mu.Unlock()
	defer func() {
		a.blob.mu.Lock()
		delete(a.blob.waiting, req)
		a.blob.mu.Unlock()
	}()
	l.out.push(&protocol.BlobGet{Req: req, Hash: hash})
	t := time.NewTimer(blobGetTimeout)
	defer t.Stop()
	select {
	case d := <-ch:
		switch {
		case d == nil:
			return nil, errSessionEnded
		case strings.HasPrefix(d.Err, protocol.BlobErrUnknown):
			return nil, fmt.Errorf("%s: %w", d.Err, blob.ErrNotServed)
		case d.Err != "":
			return nil, errors.New(d.Err)
		}
		return d.Data, nil
	case <-t.C:
		return nil, fmt.Errorf("no chunk from the master within %s", blobGetTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// blobReply hands a BlobData to the ask waiting for it.
func (a *Agent) blobReply(d *protocol.BlobData) {
	a.blob.mu.Lock()
	w, ok := a.blob.waiting[d.Req]
	delete(a.blob.waiting, d.Req)
	a.blob.mu.Unlock()
	if !ok {
		a.log.Debug("chunk nobody waits for; dropped", zap.Uint64("req", d.Req))
		return
	}
	w.ch <- d
}

// blobsLost fails the asks waiting on l's session, which ended.
func (a *Agent) blobsLost(l *link) {
	a.blob.mu.Lock()
	defer a.blob.mu.Unlock()
	for req, w := range a.blob.waiting {
		if w.l == l {
			delete(a.blob.waiting, req)
			w.ch <- nil
		}
	}
}
