package fileserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxFileBytes is the largest file whose contents the cache keeps (and the
// largest Inline puts into a job).
const MaxFileBytes = 1 << 20

// stamp is what says a file did not change since it was hashed: Salt's
// roots.file_hash keys its cache on the mtime; the size and the inode
// (an editor that saves by rename makes a new one) make a same-second
// rewrite visible too.
type stamp struct {
	size  int64
	mtime int64 // ns
	ino   uint64
}

func stampOf(fi os.FileInfo) stamp {
	return stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: inode(fi)}
}

// entry is one hashed file. It does not change once done is closed.
type entry struct {
	st    stamp
	done  chan struct{}
	size  int64
	mtime time.Time
	sum   string
	data  []byte // the contents, when small enough to keep
	err   error
}

// hash is the cached entry of the open file fh at path p, hashing it
// when its stamp changed. Callers hashing the same file at once wait for
// one read.
func (s *Server) hash(p string, fh *os.File) (*entry, error) {
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	st := stampOf(fi)
	s.mu.Lock()
	if e := s.cache[p]; e != nil && e.st == st {
		s.mu.Unlock()
		<-e.done
		if e.err == nil {
			return e, nil
		}
		// The reader that failed may have had a reason we do not share
		// (it was cancelled by a change): read for ourselves.
		return readEntry(fh, st)
	}
	if old := s.cache[p]; old != nil {
		select {
		case <-old.done: // kept: its bytes were counted
			s.bytes -= int64(len(old.data))
		default: // being read: its reader will find it replaced
		}
	}
	e := &entry{st: st, done: make(chan struct{})}
	s.cache[p] = e
	s.mu.Unlock()

	r, err := readEntry(fh, st)
	if err == nil {
		e.size, e.mtime, e.sum, e.data = r.size, r.mtime, r.sum, r.data
	}
	e.err = err

	s.mu.Lock()
	if s.cache[p] == e {
		if err != nil || r.st != st {
			delete(s.cache, p) // changed while read: do not keep it
		} else {
			s.bytes += int64(len(e.data))
			s.evict(p)
		}
	}
	close(e.done) // under s.mu: done means counted (or dropped)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r, nil
}

// readEntry reads fh from its start: the contents when they are no
// larger than MaxFileBytes, else only the hash. Its stamp is the file's
// after the read, so a caller sees whether it changed meanwhile.
func readEntry(fh *os.File, before stamp) (*entry, error) {
	e := &entry{}
	sr := io.NewSectionReader(fh, 0, 1<<62)
	h := sha256.New()
	var n int64
	if before.size <= MaxFileBytes {
		b, err := io.ReadAll(io.LimitReader(sr, MaxFileBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		h.Write(b)
		if n = int64(len(b)); n <= MaxFileBytes {
			e.data = b
		}
	}
	m, err := io.Copy(h, sr) // the rest: a large file, or one that grew
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	n += m
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	e.sum = hex.EncodeToString(h.Sum(nil))
	e.st, e.size, e.mtime = stampOf(fi), n, fi.ModTime()
	if e.st.size != n {
		e.st = stamp{} // what was read is not the file as it is now
	}
	return e, nil
}

// readAt reads fh from its start, up to max+1 bytes (so that a caller
// sees a file larger than max).
func readAt(fh *os.File, max int64) ([]byte, error) {
	if max < 1<<62 {
		max++
	}
	b, err := io.ReadAll(io.NewSectionReader(fh, 0, max))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return b, nil
}

// evict keeps the cache within its bounds, dropping entries other than
// keep, in no particular order. s.mu is held.
func (s *Server) evict(keep string) {
	if len(s.cache) <= cacheEntries && s.bytes <= cacheBytes {
		return
	}
	for p, e := range s.cache {
		if p == keep {
			continue
		}
		select {
		case <-e.done:
		default:
			continue // being read: its reader accounts for it
		}
		delete(s.cache, p)
		s.bytes -= int64(len(e.data))
		if len(s.cache) <= cacheEntries && s.bytes <= cacheBytes {
			return
		}
	}
}

func sumHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// memo is a remembered lookup: the file found (path, entry) or why none
// was (kind: ErrNotFound or ErrRefused, and its cause).
type memo struct {
	at    time.Time
	path  string
	e     *entry
	kind  error
	cause error
}

// listing is a remembered walk.
type listing struct {
	at          time.Time
	files, dirs []string // shared: not to be modified
}

func (s *Server) recall(key string) (memo, bool) {
	if s.ttl <= 0 {
		return memo{}, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.memos[key]
	if !ok || now.Sub(m.at) >= s.ttl || now.Before(m.at) {
		return memo{}, false
	}
	return m, true
}

func (s *Server) remember(key string, m memo) {
	if s.ttl <= 0 {
		return
	}
	m.at = s.now()
	s.mu.Lock()
	if len(s.memos) >= cacheEntries {
		clear(s.memos)
	}
	s.memos[key] = m
	s.mu.Unlock()
}

func (s *Server) recallList(key string) (listing, bool) {
	if s.ttl <= 0 {
		return listing{}, false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lists[key]
	if !ok || now.Sub(l.at) >= s.ttl || now.Before(l.at) {
		return listing{}, false
	}
	return l, true
}

func (s *Server) rememberList(key string, l listing) {
	if s.ttl <= 0 {
		return
	}
	l.at = s.now()
	s.mu.Lock()
	if len(s.lists) >= 1024 {
		clear(s.lists)
	}
	s.lists[key] = l
	s.mu.Unlock()
}
