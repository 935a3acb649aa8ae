package jobcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/protocol"
)

// ErrNotFound is returned for a job the cache does not hold.
var ErrNotFound = errors.New("job not found")

// ErrBadReturn is in the error of a return the cache refuses whatever the
// state of its disk: its jid or id is malformed. Any other error saving a
// return is the disk's (full, failing), and saving it again later may
// work.
var ErrBadReturn = errors.New("malformed return")

var (
	bucketLoads   = []byte("loads")
	bucketReturns = []byte("returns")
	bucketStaged  = []byte("staged")
)

// maxGroup is the most returns and loads one commit carries.
const maxGroup = 4096

// foldAt is how many staged returns make the committer fold them into the
// returns bucket (see fold).
const foldAt = 8192

// maxStagedRecord is the most bytes of returns one staged record holds
// (one return larger than that is a record of its own): a group commit of
// large returns (highstates) is several records, not one value of the
// group's size.
const maxStagedRecord = 1 << 20

// purgeChunk is the most keys one CleanOld transaction deletes, so a large
// purge does not hold the writer for long or build one huge transaction.
const purgeChunk = 10000

// Load is a job as the master published it: Salt's job load.
type Load struct {
	JID       string         `cbor:"1,keyasint"`
	Tgt       string         `cbor:"2,keyasint"`
	TgtType   string         `cbor:"3,keyasint"`
	Fun       string         `cbor:"4,keyasint"`
	Arg       []any          `cbor:"5,keyasint,omitempty"`
	Kwarg     map[string]any `cbor:"6,keyasint,omitempty"`
	Minions   []string       `cbor:"7,keyasint,omitempty"` // ids expected to return
	User      string         `cbor:"8,keyasint,omitempty"`
	Ret       string         `cbor:"9,keyasint,omitempty"` // returners named with --return
	StartTime time.Time      `cbor:"10,keyasint"`
	RetConfig string         `cbor:"11,keyasint,omitempty"` // --return_config
	RetKwargs map[string]any `cbor:"12,keyasint,omitempty"` // --return_kwargs
}

// Cache is the job cache. Its methods are safe for concurrent use.
type Cache struct {
	db  *bolt.DB
	log *zap.Logger

	gmu   sync.Mutex
	queue []*pendingReturn
	busy  bool // a caller is committing a group

	beforeCommit func(n int) // test hook: called before a group of n is committed

	// smu guards the staged returns' index. Only write transactions
	// change it, and bbolt runs one at a time.
	smu      sync.Mutex
	staged   map[string]struct{} // keys (jid/id) of the returns in bucket staged
	seq      uint64              // the last staged record's key
	foldNext int                 // fold once this many are staged

	badMu sync.Mutex
	bad   map[string]bool // records found unreadable, logged once each
}

type pendingReturn struct {
	key, val []byte
	// load: a job's load (bucket loads, replacing one of the same jid),
	// else a return (bucket returns, kept if one is held already).
	load bool
	// Set by the commit that stored it, before it tells done.
	isNew bool // the return was not held before
	err   error
	done  chan groupResult // its caller's, shared by the caller's returns
}

type groupResult struct {
	lead bool // commit the next group instead (else: one return is done)
}

// Open opens or creates the cache file at path (its directory is made 0700).
// A file locked by another process is an error after one second.
func Open(path string, log *zap.Logger) (*Cache, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open job cache %s: %w", path, err)
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	db, err := openBolt(path, &bolt.Options{
		Timeout:      time.Second,
		FreelistType: bolt.FreelistMapType,
	})
	var damaged *DamagedError
	if errors.As(err, &damaged) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open job cache %s: %w", path, err)
	}
	if err := checkPages(path, db); err != nil {
		db.Close()
		return nil, err
	}
	c := &Cache{db: db, log: log.Named("jobcache"), staged: map[string]struct{}{}, foldNext: foldAt}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketLoads, bucketReturns, bucketStaged} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return c.loadStaged(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open job cache %s: %w", path, err)
	}
	return c, nil
}

// Close folds the staged returns (so that the file is as an older Halite
// reads it) and closes the file, after any commit in progress.
func (c *Cache) Close() error {
	if c.stagedCount() > 0 {
		if err := c.fold(); err != nil {
			c.log.Warn("job cache: could not fold the staged returns before closing; they stay staged", zap.Error(err))
		}
	}
	if err := c.db.Close(); err != nil {
		return fmt.Errorf("close job cache: %w", err)
	}
	return nil
}

// SaveLoad records a job's load, replacing a load of the same jid. A load
// that GetLoad could not read back is refused (see EncodeLoad).
func (c *Cache) SaveLoad(l *Load) error {
	b, err := EncodeLoad(l)
	if err != nil {
		return err
	}
	return c.SaveLoadEncoded(l.JID, b)
}

// EncodeLoad returns l as SaveLoad stores it. It refuses a load the cache
// could not read back: the reader (GetLoad, jobs.list_jobs) decodes with
// protocol.Unmarshal, whose limits (protocol.MaxNesting, MaxElements,
// MaxContainers, valid UTF-8) are checked here by decoding the encoding
// once. The publisher calls it before it sends the job, so such a job is
// refused, not run with no record.
func EncodeLoad(l *Load) ([]byte, error) {
	if !protocol.IsJID(l.JID) {
		return nil, fmt.Errorf("save load: jid %q is not a 20-digit jid", l.JID)
	}
	b, err := protocol.Marshal(l)
	if err != nil {
		return nil, fmt.Errorf("save load %s: %w", l.JID, err)
	}
	if _, err := decodeLoad(b); err != nil {
		return nil, fmt.Errorf("save load %s: the job cache could not read it back: %w", l.JID, err)
	}
	return b, nil
}

// SaveLoadEncoded records the load of jid as EncodeLoad returned it. It
// returns when the load is durable on disk; like returns, loads saved at
// the same time share one commit (the group commit below), so that jobs
// published at once (the reactor's workers) do not wait for a commit each.
func (c *Cache) SaveLoadEncoded(jid string, b []byte) error {
	return c.QueueLoadEncoded(jid, b)()
}

// QueueLoadEncoded is SaveLoadEncoded in two steps: it queues the load for
// the group commit and returns a function that waits until the load is
// durable and says how its commit went. The publisher sends the job
// between the two, so that the commit overlaps the sending instead of
// preceding it. A return queued after the load (the job's own returns,
// once sent) is committed with it or after it, never before. wait must be
// called exactly once: until it is, the load's commit may not start.
func (c *Cache) QueueLoadEncoded(jid string, b []byte) (wait func() error) {
	done := make(chan groupResult, 2) // its result, and one call to lead
	p := &pendingReturn{key: []byte(jid), val: b, load: true, done: done}
	lead := c.enqueue([]*pendingReturn{p})
	return func() error {
		c.await(1, done, lead)
		if p.err != nil {
			return fmt.Errorf("save load %s: %w", jid, p.err)
		}
		return nil
	}
}

// SaveReturn records a return. It is idempotent on (jid, id): a return
// already held is kept and the call succeeds, so a return delivered twice
// (an agent's spool replayed after a reconnect) is stored once. It returns
// when the return is durable on disk; concurrent calls share one commit.
func (c *Cache) SaveReturn(r *protocol.ReturnBody) error {
	return c.SaveReturnEncoded(r, nil)
}

// SaveReturnEncoded is SaveReturn for a return whose CBOR encoding the
// caller already has (the body of the Return message it arrived in), which
// is stored as it is instead of being encoded again. encoded must be the
// encoding of r; nil means encode r.
func (c *Cache) SaveReturnEncoded(r *protocol.ReturnBody, encoded []byte) error {
	_, err := c.SaveReturnNew(r, encoded)
	return err
}

// SaveReturnNew is SaveReturnEncoded that also tells whether the return
// was new: false when a return of the same (jid, id) was already held (a
// replay), which the caller should not announce again.
func (c *Cache) SaveReturnNew(r *protocol.ReturnBody, encoded []byte) (bool, error) {
	isNew, errs := c.SaveReturnsNew([]*protocol.ReturnBody{r}, [][]byte{encoded})
	return isNew[0], errs[0]
}

// SaveReturnsNew is SaveReturnNew for many returns at once (a relay's
// batch): they join the group commit together and the call waits for
// them once, where one SaveReturnNew after the other would wait for a
// commit each. encoded[i] is the encoding of rs[i], or nil (encoded may
// be nil). The results are per return, in order.
func (c *Cache) SaveReturnsNew(rs []*protocol.ReturnBody, encoded [][]byte) (isNew []bool, errs []error) {
	isNew, errs = make([]bool, len(rs)), make([]error, len(rs))
	ps := make([]*pendingReturn, len(rs))
	queue := make([]*pendingReturn, 0, len(rs))
	done := make(chan groupResult, len(rs)+1) // a result each, and one call to lead
	for i, r := range rs {
		var val []byte
		if encoded != nil {
			val = encoded[i]
		}
		key, val, err := returnRecord(r, val)
		if err != nil {
			errs[i] = err
			continue
		}
		ps[i] = &pendingReturn{key: key, val: val, done: done}
		queue = append(queue, ps[i])
	}
	if len(queue) > 0 {
		c.commitQueued(queue, done)
	}
	for i, p := range ps {
		if p != nil {
			isNew[i], errs[i] = p.isNew, wrapReturnErr(rs[i], p.err)
		}
	}
	return isNew, errs
}

// returnRecord checks r and returns its key and value in the cache.
func returnRecord(r *protocol.ReturnBody, encoded []byte) (key, val []byte, err error) {
	if !protocol.IsJID(r.JID) {
		return nil, nil, fmt.Errorf("save return: jid %q is not a 20-digit jid (%w)", r.JID, ErrBadReturn)
	}
	if err := protocol.ValidID(r.ID); err != nil {
		return nil, nil, fmt.Errorf("save return %s: %w: %w", r.JID, ErrBadReturn, err)
	}
	val = encoded
	if val == nil {
		if val, err = protocol.Marshal(r); err != nil {
			return nil, nil, fmt.Errorf("save return %s/%s: %w: %w", r.JID, r.ID, ErrBadReturn, err)
		}
	}
	return returnKey(r.JID, r.ID), val, nil
}

// commitQueued queues ps (whose done is done) for the group commit and
// returns once every one of them is committed. One caller at a time leads:
// it commits what is queued, up to maxGroup, then hands the lead to the
// caller of the first return still queued. Callers whose returns arrive
// meanwhile wait and share the next commit. A caller with more than
// maxGroup returns may lead several commits in turn.
func (c *Cache) commitQueued(ps []*pendingReturn, done chan groupResult) {
	c.await(len(ps), done, c.enqueue(ps))
}

// enqueue queues ps for the group commit and reports whether their caller
// leads the next commit (no commit was under way).
func (c *Cache) enqueue(ps []*pendingReturn) (lead bool) {
	c.gmu.Lock()
	c.queue = append(c.queue, ps...)
	lead = !c.busy
	c.busy = true
	c.gmu.Unlock()
	return lead
}

// await is the rest of commitQueued, for the n queued returns of one
// caller whose results come on done; lead is what enqueue said.
func (c *Cache) await(n int, done chan groupResult, lead bool) {
	for left := n; left > 0; {
		if !lead {
			if res := <-done; !res.lead {
				left--
				continue
			}
		}
		lead = false
		c.gmu.Lock()
		n := min(len(c.queue), maxGroup)
		group := c.queue[:n:n]
		c.queue = c.queue[n:]
		c.gmu.Unlock()

		c.commitGroup(group)
		c.maybeFold()

		c.gmu.Lock()
		if len(c.queue) > 0 {
			next := c.queue[0]
			c.gmu.Unlock()
			if next.done == done {
				lead = true // our own returns are next: no one else may lead
			} else {
				next.done <- groupResult{lead: true}
			}
		} else {
			c.busy = false
			c.queue = nil
			c.gmu.Unlock()
		}
	}
}

func wrapReturnErr(r *protocol.ReturnBody, err error) error {
	if err != nil {
		return fmt.Errorf("save return %s/%s: %w", r.JID, r.ID, err)
	}
	return nil
}

// commitGroup writes the group in one transaction and tells each member the
// outcome. If the transaction fails, each member is retried alone, so one bad
// return does not fail the others.
//
// The group's new returns are staged: a record in bucket staged (see
// staged.go), appended at the end. Returns arrive in no order of agent id,
// so putting them in bucket returns (keyed jid/id) one group at a time
// rewrote most of a job's leaf pages at every commit.
func (c *Cache) commitGroup(group []*pendingReturn) {
	put := func(ps []*pendingReturn) error {
		c.smu.Lock()
		defer c.smu.Unlock()
		var added []string
		err := c.db.Update(func(tx *bolt.Tx) error {
			b, loads, staged := tx.Bucket(bucketReturns), tx.Bucket(bucketLoads), tx.Bucket(bucketStaged)
			staged.FillPercent = 1 // appended to only: fill each page
			added = added[:0]
			size := 0
			for _, p := range ps {
				// A group retried member by member starts over.
				p.isNew = false
				size += 2*binary.MaxVarintLen64 + len(p.key) + len(p.val)
			}
			held := b.Cursor()
			// The group's staged records, cut in one buffer never grown
			// (bbolt keeps what is put until the commit).
			buf := make([]byte, 0, size)
			rec := 0 // where the record being filled starts in buf
			flush := func() error {
				if len(buf) == rec {
					return nil
				}
				if err := staged.Put(binary.BigEndian.AppendUint64(nil, c.seq+1), buf[rec:]); err != nil {
					return err
				}
				c.seq++
				rec = len(buf)
				return nil
			}
			for _, p := range ps {
				if p.load {
					if err := loads.Put(p.key, p.val); err != nil {
						return err
					}
					p.isNew = true
					continue
				}
				if _, ok := c.staged[string(p.key)]; ok || has(held, p.key) {
					continue
				}
				if n := len(buf) - rec; n > 0 && n+2*binary.MaxVarintLen64+len(p.key)+len(p.val) > maxStagedRecord {
					if err := flush(); err != nil {
						return err
					}
				}
				buf = appendStaged(buf, p.key, p.val)
				k := string(p.key)
				c.staged[k] = struct{}{}
				added = append(added, k)
				p.isNew = true
			}
			return flush()
		})
		if err != nil {
			for _, k := range added {
				delete(c.staged, k)
			}
		}
		return err
	}
	if c.beforeCommit != nil {
		c.beforeCommit(len(group))
	}
	err := put(group)
	if err == nil || len(group) == 1 {
		for _, p := range group {
			p.isNew, p.err = err == nil && p.isNew, err
			p.done <- groupResult{}
		}
		return
	}
	for _, p := range group {
		err := put([]*pendingReturn{p})
		p.isNew, p.err = err == nil && p.isNew, err
		p.done <- groupResult{}
	}
}

func returnKey(jid, id string) []byte {
	k := make([]byte, 0, len(jid)+1+len(id))
	k = append(k, jid...)
	k = append(k, '/')
	return append(k, id...)
}

// GetLoad returns the load of jid, or ErrNotFound.
func (c *Cache) GetLoad(jid string) (*Load, error) {
	var l *Load
	err := c.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLoads).Get([]byte(jid))
		if v == nil {
			return ErrNotFound
		}
		var err error
		l, err = decodeLoad(v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get load %s: %w", jid, err)
	}
	return l, nil
}

func decodeLoad(v []byte) (*Load, error) {
	l := new(Load)
	if err := protocol.Unmarshal(v, l); err != nil {
		return nil, err
	}
	// The time travels as float seconds with microseconds: round off the
	// float's error.
	l.StartTime = l.StartTime.Round(time.Microsecond).UTC()
	return l, nil
}

// skipped logs, once per record, a record that does not decode and was
// left out of a listing: one damaged job must not hide the others, as
// Salt's local_cache skips a job it cannot deserialize (Salt 3006
// salt/returners/local_cache.py: _walk_through, "Failed to deserialize").
func (c *Cache) skipped(bucket, key []byte, err error) {
	k := string(bucket) + "/" + string(key)
	c.badMu.Lock()
	seen := c.bad[k]
	if !seen {
		if c.bad == nil {
			c.bad = map[string]bool{}
		}
		c.bad[k] = true
	}
	c.badMu.Unlock()
	if !seen {
		c.log.Warn("job cache record unreadable; left out of the jobs.* runners' answers",
			zap.ByteString("bucket", bucket), zap.ByteString("key", key), zap.Error(err))
	}
}

// GetReturns returns the returns of jid by agent id; an empty map when there
// are none (or no such job). A return that does not decode is left out
// (and logged once).
func (c *Cache) GetReturns(jid string) (map[string]*protocol.ReturnBody, error) {
	out := map[string]*protocol.ReturnBody{}
	prefix := returnKey(jid, "")
	err := c.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketReturns).Cursor()
		for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
			r := new(protocol.ReturnBody)
			if err := protocol.Unmarshal(v, r); err != nil {
				c.skipped(bucketReturns, k, err)
				continue
			}
			out[string(k[len(prefix):])] = r
		}
		c.stagedReturns(tx, prefix, out)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get returns %s: %w", jid, err)
	}
	return out, nil
}

// ListJobs returns the loads of the jobs started at or after since (by jid),
// newest first, at most limit of them (no limit when limit <= 0). A load
// that does not decode is left out (and logged once).
func (c *Cache) ListJobs(since time.Time, limit int) ([]*Load, error) {
	var from []byte
	if !since.IsZero() {
		from = []byte(JIDAt(since))
	}
	out := []*Load{}
	err := c.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketLoads).Cursor()
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			if from != nil && bytes.Compare(k, from) < 0 {
				break
			}
			l, err := decodeLoad(v)
			if err != nil {
				c.skipped(bucketLoads, k, err)
				continue
			}
			out = append(out, l)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// CleanOld purges the loads and returns of every job whose jid is older than
// now-keepJobs, and returns how many jobs it purged (jids with a load or
// returns). keepJobs <= 0 keeps everything, as Salt's keep_jobs: 0 does.
func (c *Cache) CleanOld(keepJobs time.Duration, now time.Time) (int, error) {
	if keepJobs <= 0 {
		return 0, nil
	}
	cutoff := []byte(JIDAt(now.Add(-keepJobs)))
	purged := map[string]struct{}{}
	for _, bucket := range [][]byte{bucketLoads, bucketReturns} {
		for {
			more := false
			err := c.db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucket)
				cur := b.Cursor()
				n := 0
				for k, _ := cur.First(); k != nil && bytes.Compare(k, cutoff) < 0; k, _ = cur.First() {
					if n == purgeChunk {
						more = true
						return nil
					}
					purged[string(k[:min(len(k), 20)])] = struct{}{}
					if err := b.Delete(k); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return len(purged), fmt.Errorf("clean job cache: %w", err)
			}
			if !more {
				break
			}
		}
	}
	if err := c.purgeStaged(cutoff, purged); err != nil {
		return len(purged), fmt.Errorf("clean job cache: %w", err)
	}
	if len(purged) > 0 {
		c.log.Info("purged old jobs", zap.Int("jobs", len(purged)), zap.String("before", string(cutoff)))
	}
	return len(purged), nil
}

// JIDAt returns the jid of time t: Salt's %Y%m%d%H%M%S%f, in UTC.
func JIDAt(t time.Time) string {
	t = t.UTC()
	return t.Format("20060102150405") + fmt.Sprintf("%06d", t.Nanosecond()/1000)
}
