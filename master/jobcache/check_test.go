package jobcache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// writtenCache makes a job cache file of many pages and returns its path,
// its bytes, its page size and how many bytes its pages in use take.
func writtenCache(t *testing.T) (path string, data []byte, pageSize, inUse int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	for i := range 300 {
		l := newLoad(t0.Add(time.Duration(i) * time.Minute))
		if err := c.SaveLoad(l); err != nil {
			t.Fatal(err)
		}
		if err := c.SaveReturn(newReturn(l.JID, "web1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m0, ok0 := parseMeta(data)
	m1, ok1 := parseMeta(data[m0.pageSize:])
	if !ok0 || !ok1 {
		t.Fatalf("parseMeta of a cache just written: not valid")
	}
	inUse = int(max(m0.pgid, m1.pgid) * m0.pageSize)
	if inUse < 16*int(m0.pageSize) {
		t.Fatalf("cache file uses %d bytes, want at least 16 pages of %d", inUse, m0.pageSize)
	}
	return path, data, int(m0.pageSize), inUse
}

// TestOpenDamaged opens job cache files damaged in the ways a full disk, a
// cut copy or a crash leave them. Before checkFile, the truncated ones
// killed the process with SIGBUS (bbolt reads its map past the file's end).
func TestOpenDamaged(t *testing.T) {
	_, good, ps, inUse := writtenCache(t)
	meta0Gone := append([]byte(nil), good...)
	copy(meta0Gone[:ps], make([]byte, ps))
	pagesGone := append([]byte(nil), good...)
	for i := 2 * ps; i < len(pagesGone); i++ {
		pagesGone[i] = 0xff
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // in the error; "" opens
	}{
		{"intact", good, ""},
		{"first meta page zeroed", meta0Gone, "bbolt check"},
		{"one page left", good[:ps], "truncated"},
		{"half a page", good[:ps/2], "truncated"},
		{"mid-page", good[:len(good)-ps/2], "not a whole number"},
		{"last pages cut", good[:inUse-4*ps], "its pages need"},
		{"only the meta pages", good[:2*ps], "its pages need"},
		{"zeros", make([]byte, len(good)), "no valid meta page"},
		{"text", []byte(strings.Repeat("not a database\n", 1000)), "no valid meta page"},
		{"pages overwritten", pagesGone, "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jobs.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Open(path, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Open: %v, want it open", err)
				}
				ls, err := c.ListJobs(time.Time{}, 0)
				if err != nil || len(ls) != 300 {
					t.Errorf("ListJobs: got %d jobs, %v; want 300", len(ls), err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("Open: no error, want one saying %q", tc.want)
			}
			var d *DamagedError
			if !errors.As(err, &d) {
				t.Fatalf("Open: got %T %v, want a *DamagedError", err, err)
			}
			msg := err.Error()
			for _, w := range []string{tc.want, path, "move it aside", "new, empty job cache"} {
				if !strings.Contains(msg, w) {
					t.Errorf("Open: got %q, want it to say %q", msg, w)
				}
			}
		})
	}
}

// TestUnreadableRecordSkipped: one job whose load or return does not
// decode is left out of the listings, logged once, and the other jobs are
// listed, as Salt's local_cache skips a job it cannot deserialize (Salt
// 3006 salt/returners/local_cache.py: _walk_through).
func TestUnreadableRecordSkipped(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	c, err := Open(filepath.Join(t.TempDir(), "jobs.db"), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var jids []string
	for i := range 3 {
		l := newLoad(t0.Add(time.Duration(i) * time.Hour))
		jids = append(jids, l.JID)
		if err := c.SaveLoad(l); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"web1", "web2"} {
			if err := c.SaveReturn(newReturn(l.JID, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.fold(); err != nil { // the returns into their bucket, to damage one there
		t.Fatal(err)
	}
	err = c.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketLoads).Put([]byte(jids[1]), []byte{0xff, 0x00, 0x13}); err != nil {
			return err
		}
		return tx.Bucket(bucketReturns).Put(returnKey(jids[2], "web1"), []byte{0x9f})
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time logs nothing more
		ls, err := c.ListJobs(time.Time{}, 0)
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		var got []string
		for _, l := range ls {
			got = append(got, l.JID)
		}
		if d := cmp.Diff([]string{jids[2], jids[0]}, got); d != "" {
			t.Errorf("ListJobs: (-want +got)\n%s", d)
		}
		rets, err := c.GetReturns(jids[2])
		if err != nil {
			t.Fatalf("GetReturns: %v", err)
		}
		if _, ok := rets["web2"]; !ok || len(rets) != 1 {
			t.Errorf("GetReturns: got %d returns %v, want web2's alone", len(rets), rets)
		}
	}
	if _, err := c.GetLoad(jids[1]); err == nil || !strings.Contains(err.Error(), jids[1]) {
		t.Errorf("GetLoad of the damaged load: got %v, want an error naming %s", err, jids[1])
	}
	if got := logs.FilterMessageSnippet("unreadable").Len(); got != 2 {
		t.Errorf("warnings about unreadable records: got %d, want 2 (one each)", got)
	}
}
