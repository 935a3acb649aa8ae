package blobs

import (
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

// DefaultMaxChunks bounds the chunks an Index holds by default: 1 Mi
// chunks, 256 GiB of files, about 100 MiB of index.
const DefaultMaxChunks = 1 << 20

// ErrUnknown is the error of Read for a hash the index does not hold.
var ErrUnknown = errors.New("unknown chunk")

// ErrFull is the error of Add when the file would take the index over its
// bound.
var ErrFull = errors.New("blob index full")

// Index maps chunk hashes to the indexed files that hold them. It is safe
// for concurrent use.
type Index struct {
	maxChunks int

	mu     sync.Mutex
	files  map[string]*file // by clean path
	chunks map[[32]byte][]loc
	count  int // chunks indexed, all files
}

type file struct {
	path  string
	size  int64
	mtime time.Time
	man   protocol.Manifest
}

// loc is where a chunk is: in f at off, n bytes long.
type loc struct {
	f   *file
	off int64
	n   int
}

// New returns an empty index that holds at most maxChunks chunks
// (DefaultMaxChunks if 0).
func New(maxChunks int) *Index {
	if maxChunks <= 0 {
		maxChunks = DefaultMaxChunks
	}
	return &Index{maxChunks: maxChunks, files: make(map[string]*file), chunks: make(map[[32]byte][]loc)}
}

// Add indexes the file at path, hashing it unless it is indexed already
// with the same size and modification time, and returns its manifest.
// Its chunks are served from then on; those of an earlier content of the
// same path no longer are.
func (x *Index) Add(path string) (protocol.Manifest, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return protocol.Manifest{}, fmt.Errorf("index %s: not a regular file", path)
	}
	x.mu.Lock()
	f := x.files[path]
	x.mu.Unlock()
	if f != nil && f.size == st.Size() && f.mtime.Equal(st.ModTime()) {
		return f.man, nil
	}
	return x.hash(path)
}

// hash reads and indexes path, replacing what was indexed under it.
func (x *Index) hash(path string) (protocol.Manifest, error) {
	fh, err := os.Open(path)
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	man, err := protocol.NewManifest(fh)
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	// Changed while read: the stat before is not the content's; index
	// it under a stat that matches no file, so the next Add hashes it.
	after, err := fh.Stat()
	if err != nil {
		return protocol.Manifest{}, fmt.Errorf("index %s: %w", path, err)
	}
	f := &file{path: path, size: st.Size(), mtime: st.ModTime(), man: man}
	if after.Size() != st.Size() || !after.ModTime().Equal(st.ModTime()) || man.Size != st.Size() {
		f.size = -1
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	old := x.files[path]
	have := x.count
	if old != nil {
		have -= len(old.man.Chunks)
	}
	if have+len(man.Chunks) > x.maxChunks {
		return protocol.Manifest{}, fmt.Errorf("index %s (%d chunks; %d of %d held): %w", path, len(man.Chunks), have, x.maxChunks, ErrFull)
	}
	if old != nil {
		x.dropLocked(old)
	}
	x.files[path] = f
	for i, h := range man.Chunks {
		k := [32]byte(h)
		x.chunks[k] = append(x.chunks[k], loc{f: f, off: int64(i) * protocol.ChunkSize, n: man.ChunkLen(i)})
	}
	x.count += len(man.Chunks)
	return man, nil
}

// dropLocked forgets f's chunks; x.mu is held.
func (x *Index) dropLocked(f *file) {
	for _, h := range f.man.Chunks {
		k := [32]byte(h)
		locs := x.chunks[k]
		kept := locs[:0]
		for _, l := range locs {
			if l.f != f {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			delete(x.chunks, k)
		} else {
			x.chunks[k] = kept
		}
	}
	x.count -= len(f.man.Chunks)
	delete(x.files, f.path)
}

// Remove forgets the file at path.
func (x *Index) Remove(path string) {
	path, err := filepath.Abs(path)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if f := x.files[path]; f != nil {
		x.dropLocked(f)
	}
}

// Len returns the number of files and chunks indexed.
func (x *Index) Len() (files, chunks int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.files), x.count
}

// Read returns the chunk whose SHA-256 is hash, read from an indexed file
// and checked against hash. A file that changed since it was indexed is
// hashed again (its old chunks are gone then: ErrUnknown, unless the new
// content holds the chunk too).
func (x *Index) Read(hash []byte) ([]byte, error) {
	if len(hash) != protocol.BlobHashSize {
		return nil, fmt.Errorf("chunk hash of %d bytes: %w", len(hash), ErrUnknown)
	}
	k := [32]byte(hash)
	for tries := 0; tries < 3; tries++ {
		x.mu.Lock()
		locs := x.chunks[k]
		var l loc
		if len(locs) > 0 {
			l = locs[0]
		}
		x.mu.Unlock()
		if l.f == nil {
			return nil, ErrUnknown
		}
		b, err := l.read()
		if err == nil {
			if s := sha256.Sum256(b); s == k {
				return b, nil
			}
		}
		// Changed, or gone: index it again (or forget it) and look again.
		if _, err := x.hash(l.f.path); err != nil {
			x.mu.Lock()
			if x.files[l.f.path] == l.f {
				x.dropLocked(l.f)
			}
			x.mu.Unlock()
		}
	}
	return nil, ErrUnknown
}

func (l loc) read() ([]byte, error) {
	fh, err := os.Open(l.f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b := make([]byte, l.n)
	if _, err := io.ReadFull(io.NewSectionReader(fh, l.off, int64(l.n)), b); err != nil {
		return nil, err
	}
	return b, nil
}
