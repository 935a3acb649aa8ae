package relay

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

func testChunk(i int) ([32]byte, []byte) {
	b := bytes.Repeat([]byte(fmt.Sprint(i)), 1000)
	return sha256.Sum256(b), b
}

// TestChunkCache: bounded in bytes (least recently used out first), a
// damaged chunk on disk is never served, and what is on disk is kept
// across a reopen (a relay restart), minus files that are not chunks.
func TestChunkCache(t *testing.T) {
	dir := t.TempDir()
	log := zaptest.NewLogger(t)
	c, err := openChunkCache(dir, 3500, log)
	if err != nil {
		t.Fatal(err)
	}
	k0, b0 := testChunk(0)
	k1, b1 := testChunk(1)
	k2, b2 := testChunk(2)
	k3, b3 := testChunk(3)
	c.put(k0, b0)
	c.put(k1, b1)
	c.put(k2, b2)
	c.get(k0) // k1 is now the least recently used
	c.put(k3, b3)
	if n, used := c.stats(); n != 3 || used != 3000 {
		t.Fatalf("stats: %d chunks, %d bytes; want 3, 3000", n, used)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%x", k1))); !os.IsNotExist(err) {
		t.Errorf("the least recently used chunk is still on disk: %v", err)
	}
	// Damage k2 on disk, and forget the hot copies: the cache refuses it.
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("%x", k2)), bytes.Repeat([]byte("x"), 1000), 0o600)
	os.WriteFile(filepath.Join(dir, ".put-123"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "not-a-chunk"), []byte("?"), 0o600)
	c, err = openChunkCache(dir, 3500, log)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c.stats(); n != 3 {
		t.Fatalf("reopened with %d chunks, want 3", n)
	}
	if b := c.get(k2); b != nil {
		t.Fatal("a damaged chunk was served")
	}
	if n, _ := c.stats(); n != 2 {
		t.Errorf("the damaged chunk is still indexed")
	}
	for _, k := range [][32]byte{k0, k3} {
		if b := c.get(k); b == nil {
			t.Errorf("chunk %x lost across the reopen", k[:4])
		}
	}
	for _, name := range []string{".put-123", "not-a-chunk"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s left in the cache directory", name)
		}
	}
}
