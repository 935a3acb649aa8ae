package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/agent/blob"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// blobFile writes n random bytes under t's temporary folder.
func blobFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	p := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func fetchTo(t *testing.T, a *agent.Agent, m protocol.Manifest) ([]byte, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "got")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.Fetcher().Fetch(ctx, m, dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// TestRelayChunks: devices behind a relay fetch a file the master indexed;
// the relay fetches each chunk from the master once (devices asking at
// once share the fetch; later ones are served from the cache), a chunk no
// file holds is refused as not served, and the cache survives a restart.
func TestRelayChunks(t *testing.T) {
	tm := startMaster(t, true)
	tr := startRelay(t, tm, "r1", func(c *config.Relay) { c.ChunkCacheBytes = 64 << 20 }, nil)
	p, data := blobFile(t, 5*protocol.ChunkSize+1234)
	m, err := tm.Blobs().Add(p)
	if err != nil {
		t.Fatal(err)
	}
	var devs []*agent.Agent
	for _, id := range []string{"cam1", "cam2", "cam3"} {
		a, _ := startDevice(t, tr, id, nil)
		devs = append(devs, a)
		tm.waitEvent(t, "salt/minion/"+id+"/start", nil)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for i, a := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := fetchTo(t, a, m)
			if err == nil && !bytes.Equal(got, data) {
				err = errors.New("content differs")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("device %d fetch: %v", i, err)
		}
	}
	st := tr.Stats()
	if st.ChunkMisses != uint64(len(m.Chunks)) || st.ChunkUpBytes != uint64(m.Size) {
		t.Errorf("upstream: %d chunks, %d bytes; want each of the %d chunks (%d bytes) once", st.ChunkMisses, st.ChunkUpBytes, len(m.Chunks), m.Size)
	}
	if served := st.ChunkMisses + st.ChunkHits + st.ChunkShared; served != uint64(len(devs)*len(m.Chunks)) {
		t.Errorf("served %d chunks (%+v), want %d", served, st, len(devs)*len(m.Chunks))
	}

	// Unknown: not served, at once (no retries until the deadline).
	bogus := m
	bogus.Chunks = append([][]byte(nil), m.Chunks...)
	bogus.Chunks[2] = bytes.Repeat([]byte{7}, 32)
	if _, err := fetchTo(t, devs[0], bogus); !errors.Is(err, blob.ErrNotServed) {
		t.Fatalf("fetch of an unknown chunk: got %v, want ErrNotServed", err)
	}

	// After a restart the cache on disk still serves: nothing more
	// comes from the master.
	tr.restart(t)
	a, _ := startDevice(t, tr, "cam4", nil)
	tm.waitEvent(t, "salt/minion/cam4/start", nil)
	got, err := fetchTo(t, a, m)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetch after relay restart: %v", err)
	}
	if st := tr.Stats(); st.ChunkMisses != 0 || st.ChunkHits != uint64(len(m.Chunks)) {
		t.Errorf("after restart: %d from the master, %d from the cache; want 0 and %d", st.ChunkMisses, st.ChunkHits, len(m.Chunks))
	}
}
