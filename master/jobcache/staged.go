package jobcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// Staged returns. A group commit does not put its returns in bucket
// returns: a fleet's returns arrive in no order of agent id, and each
// group's keys (jid/id) fell on most of the job's leaf pages, which bbolt
// read into nodes and wrote back at every commit (a job of 10,000 returns
// is about 400 pages, and a round of it some 70 commits). Instead each
// commit appends a record to bucket staged (several when its returns are
// more than maxStagedRecord bytes):
//
//	staged   sequence number (8 bytes, big-endian)  -> entries
//	entry    uvarint len(key), key (jid/id), uvarint len(value), value
//
// so a commit writes the last page or two of bucket staged and nothing
// else of the returns. Once foldAt returns are staged, fold puts them all
// in bucket returns in key order in one transaction, writing each page a
// job's returns go to once, and empties bucket staged. A staged return is
// durable like any other: the readers (GetReturns) and CleanOld read
// bucket staged too, Open reads it back after a crash, and Close folds it.
// The index c.staged of the staged keys makes SaveReturn's "already held"
// check (a replayed return) as cheap as before.

// errBadStaged is the error of a staged record that does not parse.
var errBadStaged = errors.New("staged record: malformed entry")

// appendStaged appends one entry to a staged record.
func appendStaged(rec, key, val []byte) []byte {
	rec = binary.AppendUvarint(rec, uint64(len(key)))
	rec = append(rec, key...)
	rec = binary.AppendUvarint(rec, uint64(len(val)))
	return append(rec, val...)
}

// eachStaged calls fn with each entry of a staged record, whose slices
// point into rec, and reports whether the whole record parsed; it stops at
// the first malformed entry.
func eachStaged(rec []byte, fn func(key, val []byte)) bool {
	for len(rec) > 0 {
		var kv [2][]byte
		for i := range kv {
			n, w := binary.Uvarint(rec)
			if w <= 0 || n > uint64(len(rec)-w) {
				return false
			}
			kv[i], rec = rec[w:w+int(n)], rec[w+int(n):]
		}
		if len(kv[0]) == 0 {
			return false
		}
		fn(kv[0], kv[1])
	}
	return true
}

// has reports whether cur's bucket holds key. One cursor serves a whole
// transaction: bbolt's Get makes a cursor for each call.
func has(cur *bolt.Cursor, key []byte) bool {
	k, _ := cur.Seek(key)
	return bytes.Equal(k, key)
}

// loadStaged reads the staged returns' keys into the index, as the last
// run of the master left them. Open calls it before the cache is shared.
func (c *Cache) loadStaged(tx *bolt.Tx) error {
	cur := tx.Bucket(bucketStaged).Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if len(k) == 8 {
			c.seq = max(c.seq, binary.BigEndian.Uint64(k))
		}
		if !eachStaged(v, func(key, _ []byte) { c.staged[string(key)] = struct{}{} }) {
			c.skipped(bucketStaged, k, errBadStaged)
		}
	}
	return nil
}

// stagedReturns adds the staged returns whose keys start with prefix (jid
// and "/") to out, by agent id.
func (c *Cache) stagedReturns(tx *bolt.Tx, prefix []byte, out map[string]*protocol.ReturnBody) {
	cur := tx.Bucket(bucketStaged).Cursor()
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		ok := eachStaged(v, func(key, val []byte) {
			if !bytes.HasPrefix(key, prefix) {
				return
			}
			id := string(key[len(prefix):])
			if _, held := out[id]; held {
				return
			}
			r := new(protocol.ReturnBody)
			if err := protocol.Unmarshal(val, r); err != nil {
				c.skipped(bucketStaged, key, err)
				return
			}
			out[id] = r
		})
		if !ok {
			c.skipped(bucketStaged, k, errBadStaged)
		}
	}
}

func (c *Cache) stagedCount() int {
	c.smu.Lock()
	defer c.smu.Unlock()
	return len(c.staged)
}

// maybeFold folds the staged returns once there are foldNext of them. A
// fold that fails (a full disk) is logged and tried again foldAt returns
// later; the returns stay staged, and read, meanwhile.
func (c *Cache) maybeFold() {
	c.smu.Lock()
	due := len(c.staged) >= c.foldNext
	c.smu.Unlock()
	if !due {
		return
	}
	err := c.fold()
	c.smu.Lock()
	c.foldNext = len(c.staged) + foldAt
	c.smu.Unlock()
	if err != nil {
		c.log.Warn("job cache: could not fold the staged returns; they stay staged", zap.Error(err))
	}
}

// fold moves every staged return into bucket returns, in key order, in one
// transaction, and empties bucket staged. A new job's keys sort after every
// older job's, so its returns are appended to bucket returns; its pages
// are filled to FillPercent rather than split half-empty.
func (c *Cache) fold() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	err := c.db.Update(func(tx *bolt.Tx) error {
		type entry struct{ key, val []byte }
		entries := make([]entry, 0, len(c.staged))
		cur := tx.Bucket(bucketStaged).Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			// A copy: the records' pages are freed below, and bbolt may
			// remap the file when it commits.
			if !eachStaged(bytes.Clone(v), func(key, val []byte) { entries = append(entries, entry{key, val}) }) {
				c.skipped(bucketStaged, k, errBadStaged)
			}
		}
		slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare(a.key, b.key) })
		b := tx.Bucket(bucketReturns)
		b.FillPercent = 0.9
		held := b.Cursor()
		for _, e := range entries {
			if has(held, e.key) { // staged twice: the first is kept
				continue
			}
			if err := b.Put(e.key, e.val); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketStaged); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketStaged)
		return err
	})
	if err != nil {
		return fmt.Errorf("fold staged returns: %w", err)
	}
	clear(c.staged)
	return nil
}

// purgeStaged deletes the staged returns of jobs older than cutoff, adding
// their jids to purged: a record with some of them is rewritten without
// them.
func (c *Cache) purgeStaged(cutoff []byte, purged map[string]struct{}) error {
	c.smu.Lock()
	defer c.smu.Unlock()
	var gone []string // keys of the returns purged
	err := c.db.Update(func(tx *bolt.Tx) error {
		gone = gone[:0]
		b := tx.Bucket(bucketStaged)
		type rewrite struct{ seq, rec []byte }
		var rewrites []rewrite
		cur := b.Cursor()
		for k, v := cur.First(); k != nil; k, v = cur.Next() {
			var kept []byte
			old := false
			eachStaged(v, func(key, val []byte) {
				if bytes.Compare(key, cutoff) < 0 {
					old = true
					gone = append(gone, string(key))
					return
				}
				kept = appendStaged(kept, key, val)
			})
			if old {
				rewrites = append(rewrites, rewrite{bytes.Clone(k), kept})
			}
		}
		for _, r := range rewrites {
			var err error
			if len(r.rec) == 0 {
				err = b.Delete(r.seq)
			} else {
				err = b.Put(r.seq, r.rec)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range gone {
		delete(c.staged, k)
		purged[k[:min(len(k), 20)]] = struct{}{}
	}
	return nil
}
