package queue

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/halite-fleet/halite/returners"
)

var (
	bucketQueue = []byte("queue")
	bucketDead  = []byte("dead")
)

// Queue is a durable, bounded FIFO of returners.Items in one bbolt file.
// Push is safe for concurrent use (concurrent pushes share a commit); one
// reader (a returners.Worker) peeks, acks and buries.
type Queue struct {
	db    *bolt.DB
	max   int
	ready chan struct{}

	mu    sync.Mutex
	depth int
	dead  int
}

var _ returners.Store = (*Queue)(nil)

// Open opens or creates the queue file at path, holding at most max
// items (no bound when max <= 0).
func Open(path string, max int) (*Queue, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open returner queue %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("open returner queue %s: %w", path, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond
	q := &Queue{db: db, max: max, ready: make(chan struct{}, 1)}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketQueue, bucketDead} {
			bk, err := tx.CreateBucketIfNotExists(b)
			if err != nil {
				return err
			}
			if bytes.Equal(b, bucketQueue) {
				q.depth = bk.Stats().KeyN
			} else {
				q.dead = bk.Stats().KeyN
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open returner queue %s: %w", path, err)
	}
	if q.depth > 0 {
		q.ready <- struct{}{}
	}
	return q, nil
}

// Close closes the file.
func (q *Queue) Close() error {
	if err := q.db.Close(); err != nil {
		return fmt.Errorf("close returner queue: %w", err)
	}
	return nil
}

// Push appends items and returns once they are on disk. A full queue takes
// none of them and returns returners.ErrFull; an item that cannot be
// encoded is an error and nothing is pushed.
func (q *Queue) Push(items ...*returners.Item) error {
	raws := make([][]byte, len(items))
	for i, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return fmt.Errorf("push %s: %w", it.Kind, err)
		}
		raws[i] = b
	}
	q.mu.Lock()
	if q.max > 0 && q.depth+len(raws) > q.max {
		q.mu.Unlock()
		return returners.ErrFull
	}
	q.depth += len(raws) // reserved now, so concurrent pushes respect max
	q.mu.Unlock()
	put := func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQueue)
		for _, raw := range raws {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(seqKey(seq), raw); err != nil {
				return err
			}
		}
		return nil
	}
	if err := q.db.Batch(put); err != nil {
		q.mu.Lock()
		q.depth -= len(raws)
		q.mu.Unlock()
		return fmt.Errorf("push to returner queue: %w", err)
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return nil
}

// Ready receives a value after a push (and at open when items wait).
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Peek returns up to n items from the head, oldest first, without removing
// them. An item that does not decode is returned with a nil Item.
func (q *Queue) Peek(n int) ([]returners.Entry, error) {
	var out []returners.Entry
	err := q.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketQueue).Cursor()
		for k, v := c.First(); k != nil && len(out) < n; k, v = c.Next() {
			raw := append([]byte(nil), v...)
			out = append(out, returners.Entry{Seq: binary.BigEndian.Uint64(k), Raw: raw, Item: returners.DecodeItem(raw)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("peek returner queue: %w", err)
	}
	return out, nil
}

// Ack removes delivered items.
func (q *Queue) Ack(seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	err := q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQueue)
		for _, s := range seqs {
			if err := b.Delete(seqKey(s)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ack returner queue: %w", err)
	}
	q.mu.Lock()
	q.depth -= len(seqs)
	q.mu.Unlock()
	return nil
}

// Bury moves e from the queue to the dead-letter area with the reason.
func (q *Queue) Bury(e returners.Entry, reason string) error {
	dl, err := returners.DeadLetterJSON(e.Raw, reason)
	if err != nil {
		return fmt.Errorf("bury %d: %w", e.Seq, err)
	}
	err = q.db.Update(func(tx *bolt.Tx) error {
		d := tx.Bucket(bucketDead)
		seq, err := d.NextSequence()
		if err != nil {
			return err
		}
		if err := d.Put(seqKey(seq), dl); err != nil {
			return err
		}
		return tx.Bucket(bucketQueue).Delete(seqKey(e.Seq))
	})
	if err != nil {
		return fmt.Errorf("bury %d: %w", e.Seq, err)
	}
	q.mu.Lock()
	q.depth--
	q.dead++
	q.mu.Unlock()
	return nil
}

// DeadLetters returns the items set aside, oldest first.
func (q *Queue) DeadLetters() ([]returners.DeadLetter, error) {
	var out []returners.DeadLetter
	err := q.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDead).ForEach(func(_, v []byte) error {
			var d returners.DeadLetter
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read dead letters: %w", err)
	}
	return out, nil
}

// RequeueDead moves every dead letter back to the tail of the queue, in
// one transaction, and returns how many it moved.
func (q *Queue) RequeueDead() (int, error) {
	n := 0
	err := q.db.Update(func(tx *bolt.Tx) error {
		d, b := tx.Bucket(bucketDead), tx.Bucket(bucketQueue)
		n = 0
		d.ForEach(func(_, _ []byte) error { n++; return nil })
		q.mu.Lock()
		full := q.max > 0 && q.depth+n > q.max
		q.mu.Unlock()
		if full {
			return returners.ErrFull
		}
		err := d.ForEach(func(_, v []byte) error {
			var dl returners.DeadLetter
			if err := json.Unmarshal(v, &dl); err != nil {
				return err
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			return b.Put(seqKey(seq), []byte(dl.Item))
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketDead); err != nil {
			return err
		}
		_, err = tx.CreateBucket(bucketDead)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	q.mu.Lock()
	q.depth += n
	q.dead -= n
	q.mu.Unlock()
	if n > 0 {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return n, nil
}

// Depth is how many items wait.
func (q *Queue) Depth() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.depth
}

// Dead is how many items were set aside.
func (q *Queue) Dead() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dead
}

func seqKey(s uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, s)
	return k
}
