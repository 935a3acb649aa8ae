package agent

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/halite-fleet/halite/protocol"
)

// TestCallFetchOnlyJobManifests: the local op blob.fetch fetches only a
// file whose manifest was in a job the agent handed to halite-call (its
// chunks' "__files__"); any other sha256, or a malformed manifest in a
// job, is refused before anything is asked of the master.
func TestCallFetchOnlyJobManifests(t *testing.T) {
	a := newTestAgent(t, "dev1", nil, nil)
	m, err := protocol.NewManifest(bytes.NewReader(bytes.Repeat([]byte("x"), 2*protocol.ChunkSize+3)))
	if err != nil {
		t.Fatal(err)
	}
	a.noteManifests(map[string]any{"__state__": []any{
		map[string]any{"state": "file", "fun": "managed", "__files__": map[string]any{
			"salt://big": map[string]any{"manifest": m.Any(), "sha256": hex.EncodeToString(m.SHA256)},
			"salt://bad": map[string]any{"manifest": map[string]any{"size": -1}},
		}},
	}})
	a.stcall.mu.Lock()
	_, ok := a.stcall.manifests[hex.EncodeToString(m.SHA256)]
	n := len(a.stcall.manifests)
	a.stcall.mu.Unlock()
	if !ok || n != 1 {
		t.Fatalf("manifests noted: %d (the job's: %v), want the job's one", n, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, sum := range []string{strings.Repeat("ab", 32), "../../etc/passwd", ""} {
		if _, err := a.callFetch(ctx, sum); err == nil || !strings.Contains(err.Error(), "no job this agent handed to halite-call") {
			t.Errorf("callFetch(%q): %v, want a refusal", sum, err)
		}
	}
	// The job's file: asked of the master (none here: the fetch ends
	// with the context, not with a refusal).
	if _, err := a.callFetch(ctx, hex.EncodeToString(m.SHA256)); err == nil || strings.Contains(err.Error(), "no job") {
		t.Errorf("callFetch of the job's file: %v, want a fetch that ends with its context", err)
	}
}
