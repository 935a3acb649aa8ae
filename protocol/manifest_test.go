package protocol

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNewManifest(t *testing.T) {
	for _, size := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17} {
		data := bytes.Repeat([]byte("halite"), size/6+1)[:size]
		m, err := NewManifest(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("size %d: Validate: %v", size, err)
		}
		whole := sha256.Sum256(data)
		if m.Size != int64(size) || !bytes.Equal(m.SHA256, whole[:]) {
			t.Fatalf("size %d: got size %d sha %x, want %x", size, m.Size, m.SHA256, whole)
		}
		if got, want := len(m.Chunks), ChunkCount(int64(size)); got != want {
			t.Fatalf("size %d: got %d chunks, want %d", size, got, want)
		}
		for i, h := range m.Chunks {
			c := data[i*ChunkSize : i*ChunkSize+m.ChunkLen(i)]
			if s := sha256.Sum256(c); !bytes.Equal(h, s[:]) {
				t.Errorf("size %d chunk %d: hash differs", size, i)
			}
		}
		// Through a job's kwargs: Any, CBOR, ManifestFromAny.
		b, err := Marshal(m.Any())
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		back, err := ManifestFromAny(v)
		if err != nil {
			t.Fatalf("size %d: ManifestFromAny: %v", size, err)
		}
		if diff := cmp.Diff(m, back); diff != "" || !m.Equal(back) {
			t.Errorf("size %d: manifest through Any differs (-want +got):\n%s", size, diff)
		}
	}
}

func TestManifestInvalid(t *testing.T) {
	good, err := NewManifest(strings.NewReader(strings.Repeat("x", ChunkSize+5)))
	if err != nil {
		t.Fatal(err)
	}
	h := good.Chunks[0]
	for _, tc := range []struct {
		name string
		m    Manifest
	}{
		{"negative size", Manifest{Size: -1, SHA256: h}},
		{"too large", Manifest{Size: MaxBlobSize + 1, SHA256: h, Chunks: make([][]byte, ChunkCount(MaxBlobSize+1))}},
		{"short file hash", Manifest{Size: 1, SHA256: h[:31], Chunks: [][]byte{h}}},
		{"chunks missing", Manifest{Size: ChunkSize + 1, SHA256: h, Chunks: [][]byte{h}}},
		{"chunk too many", Manifest{Size: 1, SHA256: h, Chunks: [][]byte{h, h}}},
		{"short chunk hash", Manifest{Size: 1, SHA256: h, Chunks: [][]byte{h[:5]}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.m.Validate(); err == nil {
				t.Fatalf("Validate = nil, want an error")
			}
		})
	}
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"not a map", "abc"},
		{"size a string", map[string]any{"size": "1", "sha256": strings.Repeat("0", 64), "chunks": []any{strings.Repeat("0", 64)}}},
		{"bad hex", map[string]any{"size": int64(1), "sha256": strings.Repeat("z", 64), "chunks": []any{strings.Repeat("0", 64)}}},
		{"count", map[string]any{"size": int64(ChunkSize + 1), "sha256": strings.Repeat("0", 64), "chunks": []any{strings.Repeat("0", 64)}}},
		{"huge size", map[string]any{"size": uint64(1) << 62, "sha256": strings.Repeat("0", 64), "chunks": []any{}}},
		{"chunk not a string", map[string]any{"size": int64(1), "sha256": strings.Repeat("0", 64), "chunks": []any{int64(3)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := ManifestFromAny(tc.v); err == nil {
				t.Fatalf("ManifestFromAny = %+v, want an error", m)
			}
		})
	}
}
