package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// ChunkSize is the size of every chunk of a Manifest but the last.
const ChunkSize = 256 << 10

// MaxBlobSize bounds the size of a file a Manifest names.
const MaxBlobSize = 1 << 30

// Manifest names a file by its content: its size, the SHA-256 of the whole
// file, and the SHA-256 of each ChunkSize chunk in order (the last one
// short; none for an empty file). It is carried inside a signed job, so a
// device can check every chunk it is sent, by whoever sends it.
type Manifest struct {
	Size   int64    `cbor:"1,keyasint"`
	SHA256 []byte   `cbor:"2,keyasint"`
	Chunks [][]byte `cbor:"3,keyasint"`
}

// NewManifest reads r to its end and returns the manifest of what it read.
func NewManifest(r io.Reader) (Manifest, error) {
	var m Manifest
	whole := sha256.New()
	buf := make([]byte, ChunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			m.Size += int64(n)
			if m.Size > MaxBlobSize {
				return Manifest{}, fmt.Errorf("manifest: file larger than %d bytes", MaxBlobSize)
			}
			whole.Write(buf[:n])
			h := sha256.Sum256(buf[:n])
			m.Chunks = append(m.Chunks, h[:])
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("manifest: %w", err)
		}
	}
	m.SHA256 = whole.Sum(nil)
	return m, nil
}

// ChunkCount is the number of chunks of a file of size bytes.
func ChunkCount(size int64) int {
	return int((size + ChunkSize - 1) / ChunkSize)
}

// ChunkLen is the length of chunk i of m.
func (m Manifest) ChunkLen(i int) int {
	if rest := m.Size - int64(i)*ChunkSize; rest < ChunkSize {
		return int(rest)
	}
	return ChunkSize
}

// Validate checks m's bounds: a size from 0 to MaxBlobSize, as many chunk
// hashes as the size needs, every hash BlobHashSize bytes.
func (m Manifest) Validate() error {
	switch {
	case m.Size < 0 || m.Size > MaxBlobSize:
		return fmt.Errorf("manifest: size %d out of 0..%d", m.Size, MaxBlobSize)
	case len(m.SHA256) != BlobHashSize:
		return fmt.Errorf("manifest: file hash of %d bytes, want %d", len(m.SHA256), BlobHashSize)
	case len(m.Chunks) != ChunkCount(m.Size):
		return fmt.Errorf("manifest: %d chunk hashes for %d bytes, want %d", len(m.Chunks), m.Size, ChunkCount(m.Size))
	}
	for i, h := range m.Chunks {
		if len(h) != BlobHashSize {
			return fmt.Errorf("manifest: chunk %d hash of %d bytes, want %d", i, len(h), BlobHashSize)
		}
	}
	return nil
}

// Equal reports whether m and o name the same content.
func (m Manifest) Equal(o Manifest) bool {
	if m.Size != o.Size || !bytes.Equal(m.SHA256, o.SHA256) || len(m.Chunks) != len(o.Chunks) {
		return false
	}
	for i := range m.Chunks {
		if !bytes.Equal(m.Chunks[i], o.Chunks[i]) {
			return false
		}
	}
	return true
}

// Any returns m as plain data for a job's kwargs or a state chunk:
// {"size": n, "sha256": "<hex>", "chunks": ["<hex>", ...]}.
func (m Manifest) Any() map[string]any {
	chunks := make([]any, len(m.Chunks))
	for i, h := range m.Chunks {
		chunks[i] = hex.EncodeToString(h)
	}
	return map[string]any{"size": m.Size, "sha256": hex.EncodeToString(m.SHA256), "chunks": chunks}
}

// ManifestFromAny reads a manifest made by Manifest.Any (after a CBOR
// round trip: sizes may come back as any integer type) and validates it.
func ManifestFromAny(v any) (Manifest, error) {
	d, ok := v.(map[string]any)
	if !ok {
		return Manifest{}, fmt.Errorf("manifest: want a mapping, got %T", v)
	}
	var m Manifest
	switch n := d["size"].(type) {
	case int64:
		m.Size = n
	case uint64:
		if n > MaxBlobSize {
			return Manifest{}, fmt.Errorf("manifest: size %d out of 0..%d", n, MaxBlobSize)
		}
		m.Size = int64(n)
	case int:
		m.Size = int64(n)
	default:
		return Manifest{}, fmt.Errorf("manifest: size must be an integer, got %T", d["size"])
	}
	if m.Size < 0 || m.Size > MaxBlobSize {
		return Manifest{}, fmt.Errorf("manifest: size %d out of 0..%d", m.Size, MaxBlobSize)
	}
	var err error
	if m.SHA256, err = hexHash(d["sha256"]); err != nil {
		return Manifest{}, fmt.Errorf("manifest: sha256: %w", err)
	}
	list, ok := d["chunks"].([]any)
	if !ok {
		return Manifest{}, fmt.Errorf("manifest: chunks must be a list, got %T", d["chunks"])
	}
	if len(list) != ChunkCount(m.Size) {
		return Manifest{}, fmt.Errorf("manifest: %d chunk hashes for %d bytes, want %d", len(list), m.Size, ChunkCount(m.Size))
	}
	m.Chunks = make([][]byte, len(list))
	for i, c := range list {
		if m.Chunks[i], err = hexHash(c); err != nil {
			return Manifest{}, fmt.Errorf("manifest: chunk %d: %w", i, err)
		}
	}
	return m, m.Validate()
}

func hexHash(v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok || len(s) != 2*BlobHashSize {
		return nil, fmt.Errorf("want %d hex digits", 2*BlobHashSize)
	}
	return hex.DecodeString(s)
}
