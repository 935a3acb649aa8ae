package relay

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// chunkCache is the relay's on-disk cache of file chunks, one file per
// chunk named by its SHA-256 in hex, bounded in bytes: the least recently
// used chunks are removed first. A chunk is checked against its name when
// it is read (a damaged file is removed and counts as a miss) and is put
// only once checked, so the cache never serves what its name does not
// hash to. It survives a restart: the files found at open are kept (the
// most recently modified counting as the most recently used), each still
// checked when read. A small set of the hottest chunks is kept in memory,
// checked once, for the many devices of a site that ask for the same
// chunks at the same time.
type chunkCache struct {
	dir string
	max int64
	log *zap.Logger

	mu   sync.Mutex
	lru  *list.List // of *cacheEntry, most recently used first
	idx  map[[32]byte]*list.Element
	used int64
	hot  map[[32]byte][]byte // checked chunks in memory, at most hotChunks
	hotQ [][32]byte          // hot's keys, oldest first
}

type cacheEntry struct {
	key  [32]byte
	size int64
}

// hotChunks is how many chunks the cache keeps in memory: 4 MiB.
const hotChunks = 16

// openChunkCache opens (making it) the cache in dir, bounded to max bytes,
// and indexes what it holds, removing what is not a chunk of the right
// name and size, and the least recently used chunks over max.
func openChunkCache(dir string, max int64, log *zap.Logger) (*chunkCache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("relay chunk cache %s: %w", dir, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("relay chunk cache %s: %w", dir, err)
	}
	c := &chunkCache{dir: dir, max: max, log: log, lru: list.New(), idx: make(map[[32]byte]*list.Element),
		hot: make(map[[32]byte][]byte)}
	type found struct {
		key  [32]byte
		size int64
		mod  time.Time
	}
	var all []found
	for _, e := range ents {
		name := e.Name()
		info, err := e.Info()
		k, ok := parseChunkName(name)
		if err != nil || !ok || !info.Mode().IsRegular() || info.Size() > protocol.ChunkSize {
			os.Remove(filepath.Join(dir, name)) // a temporary file, or not ours to keep
			continue
		}
		all = append(all, found{k, info.Size(), info.ModTime()})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].mod.After(all[j].mod) })
	for _, f := range all {
		c.idx[f.key] = c.lru.PushBack(&cacheEntry{f.key, f.size})
		c.used += f.size
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	if len(all) > 0 {
		log.Info("relay chunk cache", zap.String("dir", dir), zap.Int("chunks", c.lru.Len()), zap.Int64("bytes", c.used))
	}
	return c, nil
}

func parseChunkName(name string) (k [32]byte, ok bool) {
	if len(name) != 64 {
		return k, false
	}
	b, err := hex.DecodeString(name)
	if err != nil {
		return k, false
	}
	return [32]byte(b), true
}

func (c *chunkCache) path(k [32]byte) string {
	return filepath.Join(c.dir, hex.EncodeToString(k[:]))
}

// get returns the chunk named k, checked, or nil.
func (c *chunkCache) get(k [32]byte) []byte {
	c.mu.Lock()
	if b, ok := c.hot[k]; ok {
		if e := c.idx[k]; e != nil {
			c.lru.MoveToFront(e)
		}
		c.mu.Unlock()
		return b
	}
	e := c.idx[k]
	if e == nil {
		c.mu.Unlock()
		return nil
	}
	c.lru.MoveToFront(e)
	c.mu.Unlock()
	b, err := os.ReadFile(c.path(k))
	if err != nil || len(b) > protocol.ChunkSize || sha256.Sum256(b) != k {
		c.log.Warn("relay chunk cache: a chunk on disk is damaged or gone; removed", zap.String("chunk", hex.EncodeToString(k[:])))
		c.remove(k)
		return nil
	}
	now := time.Now()
	os.Chtimes(c.path(k), now, now) // the order of use, across a restart
	c.keepHot(k, b)
	return b
}

// put stores b, a chunk the caller checked against k.
func (c *chunkCache) put(k [32]byte, b []byte) {
	c.mu.Lock()
	if e := c.idx[k]; e != nil {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		c.keepHot(k, b)
		return
	}
	c.mu.Unlock()
	tmp, err := os.CreateTemp(c.dir, ".put-*")
	if err == nil {
		_, err = tmp.Write(b)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), c.path(k))
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		// A full disk costs the cache, not the transfer.
		c.log.Warn("relay chunk cache: cannot store a chunk", zap.Error(err))
		c.keepHot(k, b)
		return
	}
	c.mu.Lock()
	if c.idx[k] == nil {
		c.idx[k] = c.lru.PushFront(&cacheEntry{k, int64(len(b))})
		c.used += int64(len(b))
	}
	c.evictLocked()
	c.mu.Unlock()
	c.keepHot(k, b)
}

// keepHot keeps b in memory, dropping the oldest hot chunk past hotChunks.
func (c *chunkCache) keepHot(k [32]byte, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.hot[k]; ok {
		return
	}
	if len(c.hotQ) >= hotChunks {
		delete(c.hot, c.hotQ[0])
		c.hotQ = c.hotQ[1:]
	}
	c.hot[k] = b
	c.hotQ = append(c.hotQ, k)
}

func (c *chunkCache) remove(k [32]byte) {
	c.mu.Lock()
	if e := c.idx[k]; e != nil {
		c.used -= e.Value.(*cacheEntry).size
		c.lru.Remove(e)
		delete(c.idx, k)
	}
	delete(c.hot, k)
	c.mu.Unlock()
	os.Remove(c.path(k))
}

// evictLocked removes the least recently used chunks over max; c.mu is
// held (the files go while it is: a remove is quick, and a put of the same
// chunk must not race with it).
func (c *chunkCache) evictLocked() {
	for c.used > c.max {
		e := c.lru.Back()
		if e == nil {
			return
		}
		ce := e.Value.(*cacheEntry)
		c.lru.Remove(e)
		delete(c.idx, ce.key)
		c.used -= ce.size
		os.Remove(c.path(ce.key))
	}
}

// stats returns the chunks and bytes held.
func (c *chunkCache) stats() (chunks int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.used
}
