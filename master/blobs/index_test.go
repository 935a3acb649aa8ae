package blobs

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/halite-fleet/halite/protocol"
)

func writeRandom(t *testing.T, path string, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestIndexAddRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := writeRandom(t, p, 2*protocol.ChunkSize+100)
	x := New(0)
	m, err := x.Add(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(data); !bytes.Equal(m.SHA256, want[:]) || m.Size != int64(len(data)) {
		t.Fatalf("manifest %x/%d, want %x/%d", m.SHA256, m.Size, want, len(data))
	}
	for i, h := range m.Chunks {
		got, err := x.Read(h)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if want := data[i*protocol.ChunkSize : i*protocol.ChunkSize+m.ChunkLen(i)]; !bytes.Equal(got, want) {
			t.Fatalf("chunk %d differs", i)
		}
	}
	if _, err := x.Read(make([]byte, 32)); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown hash: got %v, want ErrUnknown", err)
	}
	if _, err := x.Read([]byte{1}); !errors.Is(err, ErrUnknown) {
		t.Fatalf("short hash: got %v, want ErrUnknown", err)
	}
	// Same size and mtime: the manifest is the one indexed, not rehashed.
	m2, err := x.Add(p)
	if err != nil || !m2.Equal(m) {
		t.Fatalf("Add again: %v, manifest equal %v", err, m2.Equal(m))
	}
}

func TestIndexChangedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	writeRandom(t, p, protocol.ChunkSize+1)
	x := New(0)
	old, err := x.Add(p)
	if err != nil {
		t.Fatal(err)
	}
	// Changed behind the index's back, same size: a read of an old chunk
	// finds the content differs, indexes the file again and refuses.
	data := writeRandom(t, p, protocol.ChunkSize+1)
	if _, err := x.Read(old.Chunks[0]); !errors.Is(err, ErrUnknown) {
		t.Fatalf("old chunk after change: got %v, want ErrUnknown", err)
	}
	h := sha256.Sum256(data[:protocol.ChunkSize])
	got, err := x.Read(h[:])
	if err != nil || !bytes.Equal(got, data[:protocol.ChunkSize]) {
		t.Fatalf("new chunk after change: %v", err)
	}
	// A new mtime and size: Add hashes it again.
	writeRandom(t, p, 10)
	os.Chtimes(p, time.Now(), time.Now().Add(time.Hour))
	m, err := x.Add(p)
	if err != nil || m.Size != 10 {
		t.Fatalf("Add after change: %v, size %d", err, m.Size)
	}
	if files, chunks := x.Len(); files != 1 || chunks != 1 {
		t.Fatalf("Len = %d files, %d chunks, want 1, 1", files, chunks)
	}
	os.Remove(p)
	if _, err := x.Read(m.Chunks[0]); !errors.Is(err, ErrUnknown) {
		t.Fatalf("removed file: got %v, want ErrUnknown", err)
	}
	if files, _ := x.Len(); files != 0 {
		t.Fatalf("removed file still indexed")
	}
}

func TestIndexBound(t *testing.T) {
	dir := t.TempDir()
	x := New(3)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeRandom(t, a, 2*protocol.ChunkSize)
	writeRandom(t, b, 2*protocol.ChunkSize)
	if _, err := x.Add(a); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Add(b); !errors.Is(err, ErrFull) {
		t.Fatalf("over the bound: got %v, want ErrFull", err)
	}
	if _, err := x.Add(dir); err == nil {
		t.Fatal("a directory was indexed")
	}
	// The same chunk in two files: served while either holds it.
	c := filepath.Join(dir, "c")
	x = New(0)
	data := writeRandom(t, a, 100)
	os.WriteFile(c, data, 0o644)
	m, _ := x.Add(a)
	x.Add(c)
	x.Remove(a)
	if _, err := x.Read(m.Chunks[0]); err != nil {
		t.Fatalf("shared chunk after one file removed: %v", err)
	}
}
