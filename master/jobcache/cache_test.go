package jobcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 22, 10, 30, 0, 123456000, time.UTC)

func openCache(t testing.TB, path string) *Cache {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "cache", "jobs.db")
	}
	var c *Cache
	var err error
	if tt, ok := t.(*testing.T); ok {
		c, err = Open(path, zaptest.NewLogger(tt))
	} else {
		c, err = Open(path, nil)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return c
}

func newLoad(at time.Time) *Load {
	return &Load{
		JID: JIDAt(at), Tgt: "web*", TgtType: "glob", Fun: "test.arg",
		Arg:     []any{"a", int64(1)},
		Kwarg:   map[string]any{"k": "v"},
		Minions: []string{"web1", "web2"},
		User:    "root", Ret: "redis", StartTime: at,
	}
}

func newReturn(jid, id string) *protocol.ReturnBody {
	return &protocol.ReturnBody{
		ID: id, JID: jid, Fun: "test.ping", FunArgs: []any{"x", int64(1)}, Return: true,
		Retcode: 0, Success: true, Stamp: "2026-11-22T10:30:00.123456",
	}
}

func TestJIDAt(t *testing.T) {
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{t0, "20261122103000123456"},
		{time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), "20260102030405000006"},
		{time.Date(2026, 1, 2, 3, 4, 5, 999, time.FixedZone("x", 3600)), "20260102020405000000"},
	} {
		got := JIDAt(tc.in)
		if got != tc.want || !protocol.IsJID(got) {
			t.Errorf("JIDAt(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSaveGet(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	l := newLoad(t0)
	if err := c.SaveLoad(l); err != nil {
		t.Fatalf("SaveLoad: %v", err)
	}
	got, err := c.GetLoad(l.JID)
	if err != nil {
		t.Fatalf("GetLoad: %v", err)
	}
	if d := cmp.Diff(l, got); d != "" {
		t.Errorf("GetLoad: (-want +got)\n%s", d)
	}
	if _, err := c.GetLoad("20000101000000000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetLoad of a missing job: got %v, want ErrNotFound", err)
	}

	r1, r2 := newReturn(l.JID, "web1"), newReturn(l.JID, "web2")
	r2.Return = map[string]any{"pid": int64(42), "stdout": "hi"}
	r2.Retcode, r2.Success = 1, false
	// A return of a neighbouring job, and an id that prefixes another.
	other := newReturn(JIDAt(t0.Add(time.Microsecond)), "web1")
	for _, r := range []*protocol.ReturnBody{r1, r2, other} {
		if err := c.SaveReturn(r); err != nil {
			t.Fatalf("SaveReturn: %v", err)
		}
	}
	rets, err := c.GetReturns(l.JID)
	if err != nil {
		t.Fatalf("GetReturns: %v", err)
	}
	want := map[string]*protocol.ReturnBody{"web1": r1, "web2": r2}
	if d := cmp.Diff(want, rets); d != "" {
		t.Errorf("GetReturns: (-want +got)\n%s", d)
	}
	rets, err = c.GetReturns("20000101000000000000")
	if err != nil || rets == nil || len(rets) != 0 {
		t.Errorf("GetReturns of a missing job: got %v, %v, want an empty map", rets, err)
	}
}

func TestBadInput(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	for _, l := range []*Load{{JID: ""}, {JID: "2026"}, {JID: "2026112210300012345x"}} {
		if err := c.SaveLoad(l); err == nil {
			t.Errorf("SaveLoad(jid %q): got nil error, want one", l.JID)
		}
	}
	jid := JIDAt(t0)
	for _, r := range []*protocol.ReturnBody{
		newReturn("123", "web1"),
		newReturn(jid, ""),
		newReturn(jid, "a/b"),
		newReturn(jid, ".."),
	} {
		if err := c.SaveReturn(r); !errors.Is(err, ErrBadReturn) {
			t.Errorf("SaveReturn(jid %q, id %q): got %v, want ErrBadReturn", r.JID, r.ID, err)
		}
	}
	rets, _ := c.GetReturns(jid)
	if len(rets) != 0 {
		t.Errorf("returns after bad saves: got %d, want 0", len(rets))
	}
}

func TestSaveReturnIdempotent(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	jid := JIDAt(t0)
	first := newReturn(jid, "web1")
	if err := c.SaveReturn(first); err != nil {
		t.Fatal(err)
	}
	again := newReturn(jid, "web1")
	again.Return = "replayed"
	for range 3 {
		if err := c.SaveReturn(again); err != nil {
			t.Fatalf("SaveReturn of a duplicate: got %v, want nil", err)
		}
	}
	rets, err := c.GetReturns(jid)
	if err != nil {
		t.Fatal(err)
	}
	if len(rets) != 1 || rets["web1"].Return != true {
		t.Errorf("returns after duplicates: got %v, want the first return only", rets)
	}
}

func TestConcurrentSaveReturn(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	jid := JIDAt(t0)
	const n = 200
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every agent's return, and a duplicate of some.
			for range 1 + i%2 {
				if err := c.SaveReturn(newReturn(jid, fmt.Sprintf("agent%03d", i))); err != nil {
					t.Errorf("SaveReturn: %v", err)
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	rets, err := c.GetReturns(jid)
	if err != nil {
		t.Fatal(err)
	}
	if len(rets) != n {
		t.Fatalf("returns: got %d, want %d", len(rets), n)
	}
	for i := range n {
		id := fmt.Sprintf("agent%03d", i)
		if r := rets[id]; r == nil || r.ID != id {
			t.Errorf("return of %s: got %+v", id, r)
		}
	}
	c.gmu.Lock()
	busy, queued := c.busy, len(c.queue)
	c.gmu.Unlock()
	if busy || queued != 0 {
		t.Errorf("after all calls returned: busy %v, %d queued, want idle and empty", busy, queued)
	}
}

// TestGroupCommit checks that returns arriving during a commit share the
// next one: the first commit is held until every other caller has queued.
func TestGroupCommit(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	const n = 200
	var groups []int // written by the leader only, one at a time
	c.beforeCommit = func(size int) {
		if len(groups) == 0 {
			deadline := time.Now().Add(10 * time.Second)
			for {
				c.gmu.Lock()
				queued := len(c.queue)
				c.gmu.Unlock()
				if queued == n-1 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("queued returns: got %d, want %d", queued, n-1)
					break
				}
				runtime.Gosched()
			}
		}
		groups = append(groups, size)
	}
	jid := JIDAt(t0)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.SaveReturn(newReturn(jid, fmt.Sprintf("agent%03d", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d := cmp.Diff([]int{1, n - 1}, groups); d != "" {
		t.Errorf("commit group sizes: (-want +got)\n%s", d)
	}
	if rets, _ := c.GetReturns(jid); len(rets) != n {
		t.Errorf("returns: got %d, want %d", len(rets), n)
	}
}

func TestListJobs(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	var jids []string
	for i := range 5 {
		l := newLoad(t0.Add(time.Duration(i) * time.Hour))
		jids = append(jids, l.JID)
		if err := c.SaveLoad(l); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		since time.Time
		limit int
		want  []string
	}{
		{"all", time.Time{}, 0, []string{jids[4], jids[3], jids[2], jids[1], jids[0]}},
		{"limit", time.Time{}, 2, []string{jids[4], jids[3]}},
		{"since", t0.Add(2 * time.Hour), 0, []string{jids[4], jids[3], jids[2]}},
		{"since between", t0.Add(150 * time.Minute), 0, []string{jids[4], jids[3]}},
		{"since and limit", t0.Add(time.Hour), 1, []string{jids[4]}},
		{"since future", t0.Add(48 * time.Hour), 0, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := c.ListJobs(tc.since, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, l := range ls {
				got = append(got, l.JID)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("ListJobs: (-want +got)\n%s", d)
			}
		})
	}
}

func TestCleanOld(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	// Jobs every hour over two days, each with two returns, and returns of
	// a job whose load was never saved.
	var all []string
	for h := range 48 {
		l := newLoad(t0.Add(time.Duration(h) * time.Hour))
		all = append(all, l.JID)
		if err := c.SaveLoad(l); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"web1", "web2"} {
			if err := c.SaveReturn(newReturn(l.JID, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	orphan := JIDAt(t0.Add(-time.Hour))
	if err := c.SaveReturn(newReturn(orphan, "web1")); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(47 * time.Hour)
	if n, err := c.CleanOld(0, now); n != 0 || err != nil {
		t.Errorf("CleanOld(0): got %d, %v, want 0, nil (keep_jobs 0 keeps all)", n, err)
	}
	n, err := c.CleanOld(24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: jobs at t0+23h .. t0+47h (the cut-off itself is not older).
	if want := 23 + 1; n != want {
		t.Errorf("CleanOld purged %d jobs, want %d", n, want)
	}
	for i, jid := range all {
		_, err := c.GetLoad(jid)
		rets, _ := c.GetReturns(jid)
		kept := i >= 23
		if kept && (err != nil || len(rets) != 2) {
			t.Errorf("job %d (%s): got load err %v, %d returns, want kept", i, jid, err, len(rets))
		}
		if !kept && (!errors.Is(err, ErrNotFound) || len(rets) != 0) {
			t.Errorf("job %d (%s): got load err %v, %d returns, want purged", i, jid, err, len(rets))
		}
	}
	if rets, _ := c.GetReturns(orphan); len(rets) != 0 {
		t.Errorf("orphan returns: got %d, want purged", len(rets))
	}
	// Nothing left in the buckets below the cut-off.
	ls, _ := c.ListJobs(time.Time{}, 0)
	if len(ls) != 25 {
		t.Errorf("jobs left: got %d, want 25", len(ls))
	}
	if n, err := c.CleanOld(24*time.Hour, now); n != 0 || err != nil {
		t.Errorf("second CleanOld: got %d, %v, want 0, nil", n, err)
	}
}

// TestCleanOldReusesFile checks that purging really frees space: after a
// round of jobs is purged, the next round fits in the same file.
func TestCleanOldReusesFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a few MB")
	}
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	defer c.Close()
	big := make([]byte, 2048)
	round := func(start time.Time) {
		t.Helper()
		for j := range 50 {
			l := newLoad(start.Add(time.Duration(j) * time.Second))
			if err := c.SaveLoad(l); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for a := range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := newReturn(l.JID, fmt.Sprintf("agent%02d", a))
					r.Return = string(big)
					if err := c.SaveReturn(r); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
	}
	// The database's high-water mark; the file itself grows in bbolt's
	// allocation steps.
	size := func() int64 {
		t.Helper()
		var n int64
		if err := c.db.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	round(t0)
	if n, err := c.CleanOld(time.Hour, t0.Add(2*time.Hour)); n != 50 || err != nil {
		t.Fatalf("CleanOld: got %d, %v, want 50, nil", n, err)
	}
	after1 := size()
	for i := 1; i <= 3; i++ {
		round(t0.Add(time.Duration(i) * 3 * time.Hour))
		if n, err := c.CleanOld(time.Hour, t0.Add(time.Duration(i)*3*time.Hour+2*time.Hour)); n != 50 || err != nil {
			t.Fatalf("CleanOld round %d: got %d, %v, want 50, nil", i, n, err)
		}
	}
	// Without reuse it would hold four rounds; allow some fragmentation.
	if got, limit := size(), after1*5/4; got > limit {
		t.Errorf("database size after three more rounds: got %d bytes, want at most %d (freed pages reused)", got, limit)
	}
	t.Logf("database size %d bytes for one round of 50 jobs x 40 returns of 2 KiB", after1)
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	l := newLoad(t0)
	if err := c.SaveLoad(l); err != nil {
		t.Fatal(err)
	}
	if err := c.SaveReturn(newReturn(l.JID, "web1")); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.SaveReturn(newReturn(l.JID, "web2")); err == nil {
		t.Errorf("SaveReturn after Close: got nil error, want one")
	}

	c = openCache(t, path)
	defer c.Close()
	got, err := c.GetLoad(l.JID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(l, got); d != "" {
		t.Errorf("load after reopen: (-want +got)\n%s", d)
	}
	rets, err := c.GetReturns(l.JID)
	if err != nil || len(rets) != 1 || rets["web1"] == nil {
		t.Errorf("returns after reopen: got %v, %v, want web1's", rets, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("file mode: got %o, want 600", m)
	}
}

// TestSaveReturnNew: exactly one save of a (jid, id) reports it new, also
// when the duplicates share a commit, and after the cache is reopened.
func TestSaveReturnNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	c := openCache(t, path)
	jid := JIDAt(t0)
	const n = 50
	var wg sync.WaitGroup
	var fresh atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			isNew, err := c.SaveReturnNew(newReturn(jid, "web1"), nil)
			if err != nil {
				t.Errorf("SaveReturnNew: %v", err)
			}
			if isNew {
				fresh.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := fresh.Load(); got != 1 {
		t.Errorf("concurrent saves of one return: got %d reported new, want 1", got)
	}
	if isNew, err := c.SaveReturnNew(newReturn(jid, "web2"), nil); err != nil || !isNew {
		t.Errorf("SaveReturnNew of another agent's return: got %v, %v, want true, nil", isNew, err)
	}
	c.Close()
	c = openCache(t, path)
	defer c.Close()
	for _, id := range []string{"web1", "web2"} {
		if isNew, err := c.SaveReturnNew(newReturn(jid, id), nil); err != nil || isNew {
			t.Errorf("SaveReturnNew of %s after reopening: got %v, %v, want false, nil", id, isNew, err)
		}
	}
	if _, err := c.SaveReturnNew(newReturn("nope", "web1"), nil); err == nil {
		t.Error("SaveReturnNew with a bad jid: got nil error")
	}
}

// TestSaveReturnsNew: a batch of returns is one commit, reports each
// return's own outcome (new, replayed, refused) in order, and a batch
// larger than a group, saved while single returns arrive, is stored whole.
func TestSaveReturnsNew(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	jid := JIDAt(t0)
	if err := c.SaveReturn(newReturn(jid, "old")); err != nil {
		t.Fatal(err)
	}
	var groups []int
	c.beforeCommit = func(n int) { groups = append(groups, n) }
	rs := []*protocol.ReturnBody{newReturn(jid, "a"), newReturn(jid, "old"), newReturn("nope", "b"), newReturn(jid, "a"), newReturn(jid, "c")}
	isNew, errs := c.SaveReturnsNew(rs, nil)
	if d := cmp.Diff([]bool{true, false, false, false, true}, isNew); d != "" {
		t.Errorf("isNew (-want +got):\n%s", d)
	}
	for i, err := range errs {
		if (err != nil) != (i == 2) {
			t.Errorf("return %d: err %v", i, err)
		}
	}
	if d := cmp.Diff([]int{4}, groups); d != "" {
		t.Errorf("commit group sizes (-want +got):\n%s", d)
	}
	c.beforeCommit = nil

	const big = maxGroup + 100
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.SaveReturn(newReturn(jid, fmt.Sprintf("single%02d", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	rs = rs[:0]
	for i := range big {
		rs = append(rs, newReturn(jid, fmt.Sprintf("batch%05d", i)))
	}
	isNew, errs = c.SaveReturnsNew(rs, nil)
	wg.Wait()
	for i := range rs {
		if !isNew[i] || errs[i] != nil {
			t.Fatalf("big batch, return %d: isNew %v, err %v", i, isNew[i], errs[i])
		}
	}
	if rets, _ := c.GetReturns(jid); len(rets) != 3+big+20 {
		t.Errorf("returns: got %d, want %d", len(rets), 3+big+20)
	}
	c.gmu.Lock()
	busy, queued := c.busy, len(c.queue)
	c.gmu.Unlock()
	if busy || queued != 0 {
		t.Errorf("after all calls returned: busy %v, %d queued, want idle and empty", busy, queued)
	}
}

// TestEncodeLoadLimits: a load that GetLoad could not decode (over
// protocol's decoder limits, or not valid UTF-8) is refused before it is
// stored, and nothing is stored.
func TestEncodeLoadLimits(t *testing.T) {
	deep := any("x")
	for range protocol.MaxNesting + 2 {
		deep = []any{deep}
	}
	many := make([]any, protocol.MaxElements+1)
	for i := range many {
		many[i] = "a"
	}
	containers := make([]any, 0, 300)
	for range 300 {
		l := make([]any, 300)
		for i := range l {
			l[i] = []any{}
		}
		containers = append(containers, l)
	}
	jid := JIDAt(t0)
	tests := []struct {
		name string
		load *Load
		ok   bool
	}{
		{"small", &Load{JID: jid, Fun: "test.echo", Arg: []any{"hello"}}, true},
		{"nested too deep", &Load{JID: jid, Fun: "test.echo", Arg: []any{deep}}, false},
		{"too many items", &Load{JID: jid, Fun: "test.echo", Arg: many}, false},
		{"too many containers", &Load{JID: jid, Fun: "test.echo", Arg: containers}, false},
		{"invalid UTF-8", &Load{JID: jid, Fun: "test.echo", Kwarg: map[string]any{"text": "a\xffb"}}, false},
	}
	c := openCache(t, "")
	defer c.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := EncodeLoad(tt.load)
			if got := err == nil; got != tt.ok {
				t.Fatalf("EncodeLoad: got error %v, want ok %v", err, tt.ok)
			}
			if err := c.SaveLoad(tt.load); (err == nil) != tt.ok {
				t.Fatalf("SaveLoad: got error %v, want ok %v", err, tt.ok)
			}
			_, err = c.GetLoad(jid)
			switch {
			case tt.ok && err != nil:
				t.Errorf("GetLoad: got %v, want the load", err)
			case !tt.ok && !errors.Is(err, ErrNotFound):
				t.Errorf("GetLoad after a refused load: got %v, want not found", err)
			}
			c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLoads).Delete([]byte(jid)) })
		})
	}
}

// TestLoadJoinsGroupCommit: a load queued by the publisher (before it
// sends the job) and the returns that arrive before it waits share one
// commit, the load is readable once its wait returns, and nothing is
// committed until the load's caller, who leads, waits.
func TestLoadJoinsGroupCommit(t *testing.T) {
	c := openCache(t, "")
	defer c.Close()
	var groups []int // written by the leader only
	c.beforeCommit = func(n int) { groups = append(groups, n) }
	jid := JIDAt(t0)
	b, err := EncodeLoad(&Load{JID: jid, Fun: "test.ping", Minions: []string{"a1"}, StartTime: t0})
	if err != nil {
		t.Fatal(err)
	}
	wait := c.QueueLoadEncoded(jid, b)
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.SaveReturn(newReturn(jid, fmt.Sprintf("agent%03d", i))); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.gmu.Lock()
		queued := len(c.queue)
		c.gmu.Unlock()
		if queued == n+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued: got %d, want %d", queued, n+1)
		}
		runtime.Gosched()
	}
	if len(groups) != 0 {
		t.Fatalf("committed %v before the load's caller waited", groups)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetLoad(jid); err != nil {
		t.Errorf("load after its wait: %v", err)
	}
	wg.Wait()
	if d := cmp.Diff([]int{n + 1}, groups); d != "" {
		t.Errorf("commit group sizes: (-want +got)\n%s", d)
	}
	if rets, _ := c.GetReturns(jid); len(rets) != n {
		t.Errorf("returns: got %d, want %d", len(rets), n)
	}
}
