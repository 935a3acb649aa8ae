package jobcache

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/halite-fleet/halite/protocol"
)

// bucketKeys counts the keys of a bucket of c's file.
func bucketKeys(t *testing.T, c *Cache, bucket []byte) int {
	t.Helper()
	n := 0
	if err := c.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucket).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// saveShuffled saves the returns of ids to jid in batches of batch, in a
// random order, and fails unless each was new.
func saveShuffled(t *testing.T, c *Cache, jid string, ids []string, batch int) {
	t.Helper()
	ids = append([]string(nil), ids...)
	rand.New(rand.NewPCG(7, 8)).Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for from := 0; from < len(ids); from += batch {
		var rs []*protocol.ReturnBody
		for _, id := range ids[from:min(from+batch, len(ids))] {
			rs = append(rs, newReturn(jid, id))
		}
		isNew, errs := c.SaveReturnsNew(rs, nil)
		for i := range rs {
			if errs[i] != nil || !isNew[i] {
				t.Fatalf("save %s: new %v, error %v; want new", rs[i].ID, isNew[i], errs[i])
			}
		}
	}
}

func idsN(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("cam%05d", i)
	}
	return ids
}

// wantReturns fails unless GetReturns(jid) holds exactly ids.
func wantReturns(t *testing.T, c *Cache, jid string, ids []string) {
	t.Helper()
	got, err := c.GetReturns(jid)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) {
		t.Errorf("GetReturns(%s): %d returns, want %d", jid, len(got), len(ids))
	}
	for _, id := range ids {
		if r := got[id]; r == nil || r.ID != id || r.JID != jid {
			t.Errorf("GetReturns(%s)[%s] = %+v, want its return", jid, id, r)
		}
	}
}

// TestStagedSurviveCrash: returns staged and not yet folded are read, are
// still there after the master dies without closing the cache (the file
// closed under it), and a replay of one of them is not new.
func TestStagedSurviveCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	jid := JIDAt(t0)
	ids := idsN(300)
	saveShuffled(t, c, jid, ids, 7)
	if n := bucketKeys(t, c, bucketReturns); n != 0 {
		t.Fatalf("bucket returns holds %d keys before any fold, want 0 (all staged)", n)
	}
	wantReturns(t, c, jid, ids)
	if err := c.db.Close(); err != nil { // no fold: as if the master died
		t.Fatal(err)
	}

	c = openCache(t, path)
	defer c.Close()
	if got := c.stagedCount(); got != len(ids) {
		t.Errorf("staged after reopen: %d, want %d", got, len(ids))
	}
	wantReturns(t, c, jid, ids)
	isNew, err := c.SaveReturnNew(newReturn(jid, ids[42]), nil)
	if err != nil || isNew {
		t.Errorf("replay of a staged return after reopen: new %v, %v; want not new", isNew, err)
	}
	if isNew, err := c.SaveReturnNew(newReturn(jid, "cam99999"), nil); err != nil || !isNew {
		t.Errorf("a new return after reopen: new %v, %v; want new", isNew, err)
	}
}

// TestFold: once foldAt returns are staged they move to bucket returns in
// one commit; every return is read before, during and after, exactly once;
// replays of folded and of staged returns are not new; the staged records'
// pages go back to the file's free pages.
func TestFold(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	jid1, jid2 := JIDAt(t0), JIDAt(t0.Add(time.Second))
	ids := idsN(foldAt + 500)
	saveShuffled(t, c, jid1, ids[:foldAt-100], 150)
	if n := bucketKeys(t, c, bucketReturns); n != 0 {
		t.Fatalf("bucket returns holds %d keys before foldAt, want 0", n)
	}
	saveShuffled(t, c, jid1, ids[foldAt-100:], 150)
	folded := bucketKeys(t, c, bucketReturns)
	if folded < foldAt || folded > foldAt+150 {
		t.Errorf("bucket returns holds %d keys after foldAt returns, want one fold's, %d to %d", folded, foldAt, foldAt+150)
	}
	if got, want := c.stagedCount(), len(ids)-folded; got != want {
		t.Errorf("staged after the fold: %d, want %d", got, want)
	}
	wantReturns(t, c, jid1, ids)
	saveShuffled(t, c, jid2, ids[:10], 3)
	wantReturns(t, c, jid2, ids[:10])

	for _, id := range []string{ids[0], ids[len(ids)-1]} { // one folded, one staged, or both folded
		if isNew, err := c.SaveReturnNew(newReturn(jid1, id), nil); err != nil || isNew {
			t.Errorf("replay of %s: new %v, %v; want not new", id, isNew, err)
		}
	}
	if err := c.fold(); err != nil {
		t.Fatal(err)
	}
	if n := bucketKeys(t, c, bucketReturns); n != len(ids)+10 {
		t.Errorf("bucket returns after the last fold: %d keys, want %d", n, len(ids)+10)
	}
	if n := bucketKeys(t, c, bucketStaged); n != 0 || c.stagedCount() != 0 {
		t.Errorf("after the last fold: %d staged records, %d indexed, want none", n, c.stagedCount())
	}
	wantReturns(t, c, jid1, ids)
	if isNew, err := c.SaveReturnNew(newReturn(jid1, ids[len(ids)-1]), nil); err != nil || isNew {
		t.Errorf("replay after the last fold: new %v, %v; want not new", isNew, err)
	}
}

// TestCloseFolds: Close leaves no staged returns, so an older Halite,
// which reads only bucket returns, finds them all.
func TestCloseFolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	jid := JIDAt(t0)
	ids := idsN(50)
	saveShuffled(t, c, jid, ids, 4)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketStaged).Stats().KeyN; n != 0 {
			t.Errorf("after Close: %d staged records, want 0", n)
		}
		if n := tx.Bucket(bucketReturns).Stats().KeyN; n != len(ids) {
			t.Errorf("after Close: %d returns, want %d", n, len(ids))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCleanOldStaged: CleanOld purges the staged returns of old jobs too,
// also from a record that holds returns of a job it keeps.
func TestCleanOldStaged(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	oldJID, newJID := JIDAt(t0), JIDAt(t0.Add(48*time.Hour))
	ids := idsN(20)
	saveShuffled(t, c, oldJID, ids[:10], 5)
	// One commit with returns of both jobs: one record to rewrite.
	var rs []*protocol.ReturnBody
	for _, id := range ids[10:] {
		rs = append(rs, newReturn(oldJID, id), newReturn(newJID, id))
	}
	if _, errs := c.SaveReturnsNew(rs, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	n, err := c.CleanOld(24*time.Hour, t0.Add(48*time.Hour))
	if err != nil || n != 1 {
		t.Errorf("CleanOld: %d jobs, %v; want 1 (the old job's staged returns)", n, err)
	}
	wantReturns(t, c, oldJID, nil)
	wantReturns(t, c, newJID, ids[10:])
	if got := c.stagedCount(); got != 10 {
		t.Errorf("staged after CleanOld: %d, want 10", got)
	}
	if isNew, err := c.SaveReturnNew(newReturn(oldJID, ids[0]), nil); err != nil || !isNew {
		t.Errorf("a purged return saved again: new %v, %v; want new", isNew, err)
	}
}

// TestStagedDamaged: a staged record that does not parse is left out and
// logged once; the returns of other records are read, and Open works.
func TestStagedDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	jid := JIDAt(t0)
	saveShuffled(t, c, jid, []string{"web1"}, 1)
	err := c.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketStaged)
		if err := b.Put([]byte("\x00\x00\x00\x00\x00\x00\x00\x09"), []byte{0x40, 'x'}); err != nil {
			return err
		}
		return b.Put([]byte("\x00\x00\x00\x00\x00\x00\x00\x0a"), appendStaged(nil, returnKey(jid, "web2"), []byte{0x9f}))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.db.Close(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	c, err = Open(path, zap.New(core))
	if err != nil {
		t.Fatalf("Open with a damaged staged record: %v", err)
	}
	defer c.Close()
	for range 2 {
		wantReturns(t, c, jid, []string{"web1"})
	}
	if got := logs.FilterMessageSnippet("unreadable").Len(); got != 2 {
		t.Errorf("warnings about unreadable records: got %d, want 2 (one each)", got)
	}
	if isNew, err := c.SaveReturnNew(newReturn(jid, "web3"), nil); err != nil || !isNew {
		t.Errorf("save after a damaged record: new %v, %v; want new", isNew, err)
	}
}

func TestEachStaged(t *testing.T) {
	rec := appendStaged(appendStaged(nil, []byte("a/1"), []byte("v1")), []byte("a/2"), nil)
	var got []string
	if !eachStaged(rec, func(k, v []byte) { got = append(got, string(k)+"="+string(v)) }) {
		t.Fatal("a good record did not parse")
	}
	if fmt.Sprint(got) != "[a/1=v1 a/2=]" {
		t.Errorf("entries: %v", got)
	}
	for _, bad := range [][]byte{
		{0x05, 'a'},        // key longer than the record
		{0x00, 0x00},       // empty key
		{0x01, 'k', 0x09},  // value longer than the record
		{0x01, 'k'},        // no value length
		{0xff, 0xff, 0xff}, // bad uvarint
	} {
		if eachStaged(bad, func(k, v []byte) {}) {
			t.Errorf("eachStaged(%x): parsed, want refused", bad)
		}
	}
}

// TestStagedLargeGroup: a group commit whose returns are more than
// maxStagedRecord bytes is staged as several records, none much larger,
// and every return reads back before and after the fold.
func TestStagedLargeGroup(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	jid := JIDAt(t0)
	big := strings.Repeat("x", 300<<10)
	var rs []*protocol.ReturnBody
	var ids []string
	for _, id := range idsN(10) {
		r := newReturn(jid, id)
		r.Return = big
		rs, ids = append(rs, r), append(ids, id)
	}
	if _, errs := c.SaveReturnsNew(rs, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	records, largest := 0, 0
	if err := c.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketStaged).ForEach(func(k, v []byte) error {
			records, largest = records+1, max(largest, len(v))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if records < 3 || largest > maxStagedRecord {
		t.Errorf("10 returns of 300 KiB staged as %d records, the largest %d bytes; want at least 3 of at most %d", records, largest, maxStagedRecord)
	}
	check := func(when string) {
		got, err := c.GetReturns(jid)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if r := got[id]; r == nil || r.Return != big {
				t.Errorf("%s: %s's return missing or changed", when, id)
			}
		}
	}
	check("staged")
	if err := c.fold(); err != nil {
		t.Fatal(err)
	}
	check("folded")
}
