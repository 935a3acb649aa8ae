package jobcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	bolt "go.etcd.io/bbolt"
)

// A job cache file that bbolt cannot map safely (cut short by a full disk,
// a copy that stopped, a file system repaired after a crash) would not fail
// to open: bbolt maps the whole file and reads pages past its end, and the
// master dies of SIGBUS on the first job that touches them, at every
// restart. checkFile reads the file's two meta pages itself, as bbolt does
// (db.go: getPageSize, mmap, meta; internal/common/meta.go: Validate), and
// refuses a file that bbolt would read past its end; Open then runs bbolt's
// own consistency check (Tx.Check) on files up to checkMax.

// checkMax is the largest job cache file whose pages Open walks with
// bbolt's consistency check (a few milliseconds a megabyte); a larger one
// is only checked for its size and meta pages.
const checkMax = 256 << 20

// bbolt's on-disk layout (go.etcd.io/bbolt internal/common: page.go,
// meta.go): each page starts with a 16-byte header; pages 0 and 1 hold a
// meta each, right after the header.
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltPageHeader  = 16
	boltMetaSize    = 64 // magic … txid, checksum
	boltMetaSummed  = 56 // the bytes the FNV-64a checksum covers
	boltNoFreelist  = ^uint64(0)
	boltMaxPageSize = 1024 << 14 // bbolt looks for page 1 up to 16 MiB
)

// boltMeta is the part of bbolt's meta page checkFile reads.
type boltMeta struct {
	pageSize uint64
	root     uint64 // page of the root bucket
	freelist uint64 // page of the freelist, or boltNoFreelist
	pgid     uint64 // high water mark: pages 0 … pgid-1 are in use
	txid     uint64
}

// parseMeta reads the meta in page, which starts at a page's header; ok is
// false when it is not a valid meta (magic, version, checksum).
func parseMeta(page []byte) (m boltMeta, ok bool) {
	if len(page) < boltPageHeader+boltMetaSize {
		return m, false
	}
	b := page[boltPageHeader : boltPageHeader+boltMetaSize]
	le := binary.NativeEndian
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(b[:boltMetaSummed])
	if h.Sum64() != le.Uint64(b[boltMetaSummed:]) {
		return m, false
	}
	return boltMeta{
		pageSize: uint64(le.Uint32(b[8:])),
		root:     le.Uint64(b[16:]),
		freelist: le.Uint64(b[32:]),
		pgid:     le.Uint64(b[40:]),
		txid:     le.Uint64(b[48:]),
	}, true
}

// DamagedError is a job cache file that cannot be opened safely.
type DamagedError struct {
	Path   string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("job cache %s is damaged (%s): move it aside (mv %s %s.damaged) and start the master again; "+
		"it makes a new, empty job cache, and the jobs and returns held in the old one are no longer listed by the jobs.* runners",
		e.Path, e.Reason, e.Path, e.Path)
}

// checkFile reports a DamagedError when path is not a bbolt file whose
// meta pages are valid and whose pages are all in the file. A missing or
// empty file is fine: bbolt makes a new one.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open job cache %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open job cache %s: %w", path, err)
	}
	size := uint64(fi.Size())
	if size == 0 {
		return nil
	}
	damaged := func(format string, a ...any) error {
		return &DamagedError{Path: path, Reason: fmt.Sprintf(format, a...)}
	}
	read := func(off uint64) []byte {
		buf := make([]byte, boltPageHeader+boltMetaSize)
		n, _ := f.ReadAt(buf, int64(off))
		return buf[:n]
	}
	// The page size: page 0's, else page 1's, found where bbolt looks.
	m0, ok0 := parseMeta(read(0))
	pageSize := m0.pageSize
	if !ok0 {
		for pos := uint64(1024); pos <= boltMaxPageSize && pos < size; pos <<= 1 {
			if m, ok := parseMeta(read(pos)); ok && m.pageSize == pos {
				pageSize = pos
				break
			}
		}
	}
	if pageSize == 0 {
		return damaged("%d bytes and no valid meta page: not a bbolt file, or its start is overwritten", size)
	}
	if pageSize < 1024 || pageSize > boltMaxPageSize || pageSize&(pageSize-1) != 0 {
		return damaged("meta page gives a page size of %d", pageSize)
	}
	if size < 2*pageSize {
		return damaged("truncated: %d bytes, less than its two meta pages of %d bytes", size, pageSize)
	}
	if size%pageSize != 0 {
		return damaged("truncated: %d bytes is not a whole number of %d-byte pages", size, pageSize)
	}
	m1, ok1 := parseMeta(read(pageSize))
	// bbolt uses the meta of the higher txid if it is valid, else the
	// other (db.go: meta).
	m, ok := m0, ok0
	if ok1 && m1.pageSize == pageSize && (!ok0 || m1.txid > m0.txid) {
		m, ok = m1, true
	}
	if !ok {
		return damaged("no valid meta page")
	}
	if need := m.pgid * pageSize; m.pgid > size/pageSize || size < need {
		return damaged("truncated: %d bytes, its pages need %d", size, m.pgid*pageSize)
	}
	if m.root >= m.pgid || (m.freelist >= m.pgid && m.freelist != boltNoFreelist) {
		return damaged("meta page points past the file's last page")
	}
	return nil
}

// checkPages runs bbolt's consistency check on db (the file at path) when
// its pages are not more than checkMax bytes.
func checkPages(path string, db *bolt.DB) error {
	return db.View(func(tx *bolt.Tx) error {
		if tx.Size() > checkMax {
			return nil
		}
		var errs []error
		for err := range tx.Check() {
			if len(errs) < 3 {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return &DamagedError{Path: path, Reason: "bbolt check: " + joinErrs(errs)}
		}
		return nil
	})
}

func joinErrs(errs []error) string {
	var out string
	for i, err := range errs {
		if i > 0 {
			out += "; "
		}
		out += err.Error()
	}
	return out
}

// openBolt opens path with bbolt, turning a panic on a damaged file (bbolt
// panics on a freelist page that is not one) into a DamagedError.
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, &DamagedError{Path: path, Reason: fmt.Sprint("bbolt: ", r)}
		}
	}()
	return bolt.Open(path, 0o600, opts)
}
