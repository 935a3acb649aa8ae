package returners

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOptions(t *testing.T) {
	cfg := Config{
		Opts: map[string]any{
			"mysql.host": "db1", "mysql.port": 3307, "alternative.mysql.host": "db2",
			"redis":                 map[string]any{"host": "nested"},
			"returner.pgjsonb.user": "pg1", "pgjsonb.user": "pg2", "pgjsonb.db": "fallback",
			"alternative.pgjsonb.db": "alt",
		},
	}
	alt := cfg
	alt.RetConfig = "alternative"
	kw := alt
	kw.Kwargs = map[string]any{"host": "kwhost"}
	for _, c := range []struct {
		name string
		o    Options
		attr string
		want string
	}{
		{"plain", cfg.Options("mysql"), "host", "db1"},
		{"alternative wins", alt.Options("mysql"), "host", "db2"},
		{"alternative falls back", alt.Options("mysql"), "port", "3307"},
		{"kwargs win", kw.Options("mysql"), "host", "kwhost"},
		{"nested", cfg.Options("redis"), "host", "nested"},
		{"first prefix wins", cfg.Options("returner.pgjsonb", "pgjsonb"), "user", "pg1"},
		{"second prefix", cfg.Options("returner.pgjsonb", "pgjsonb"), "db", "fallback"},
		{"alternative of second prefix", alt.Options("returner.pgjsonb", "pgjsonb"), "db", "alt"},
		{"default", cfg.Options("mysql"), "user", "salt"},
	} {
		if got := c.o.String(c.attr, "salt"); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.name, c.attr, got, c.want)
		}
	}
	if _, err := (Config{Opts: map[string]any{"x.port": "many"}}).Options("x").Int("port", 1); err == nil {
		t.Error("port: many: got no error, want one naming x.port")
	}
}

type fake struct {
	mu      sync.Mutex
	got     []string
	failN   int    // fail this many calls first
	refuse  string // id refused for good
	events  int
	loads   int
	callErr error
	onClose func()
}

func (f *fake) Returner(_ context.Context, ret map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failN > 0 {
		f.failN--
		return errors.New("backend down")
	}
	if ret["id"] == f.refuse {
		return Permanent(errors.New("row too large"))
	}
	f.got = append(f.got, fmt.Sprint(ret["id"]))
	return nil
}
func (f *fake) EventReturn(_ context.Context, ev []Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events += len(ev)
	return nil
}
func (f *fake) Close() error {
	if f.onClose != nil {
		f.onClose()
	}
	return nil
}

func (f *fake) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 20*time.Second, what, cond)
}

func TestWorkerRetriesInOrderAndBuriesRefused(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenSpool(dir, "fake", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{failN: 3, refuse: "bad"}
	for _, id := range []string{"a", "b", "bad", "c"} {
		if err := q.Push(&Item{Kind: KindRet, Ret: map[string]any{"id": id, "jid": "1", "n": int64(7)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Push(&Item{Kind: KindEvents, Events: []Event{{Tag: "x"}, {Tag: "y"}}}); err != nil {
		t.Fatal(err)
	}
	w := NewWorker("fake", q, f, zaptest.NewLogger(t))
	w.MinBackoff, w.MaxBackoff = time.Millisecond, 5*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	waitFor(t, "delivery", func() bool { return q.Depth() == 0 })
	cancel()
	<-done
	if got := fmt.Sprint(f.ids()); got != "[a b c]" {
		t.Errorf("delivered %s, want [a b c] in order", got)
	}
	if f.events != 2 {
		t.Errorf("events delivered: got %d, want 2", f.events)
	}
	st := w.Status()
	if st.Failures != 3 || st.Dead != 1 || st.Delivered != 4 || st.Retrying {
		t.Errorf("status = %+v, want 3 failures, 1 dead, 4 delivered, not retrying", st)
	}
	dl, err := q.DeadLetters()
	if err != nil || len(dl) != 1 || dl[0].Reason != "row too large" {
		t.Fatalf("dead letters = %+v, %v; want the refused row with its reason", dl, err)
	}
	q.Close()
	// What was set aside and the counts survive a reopen.
	q, err = OpenSpool(dir, "fake", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.Dead() != 1 || q.Depth() != 0 {
		t.Fatalf("after reopen: dead %d depth %d, want 1 and 0", q.Dead(), q.Depth())
	}
	// returners.requeue_dead: the letter goes back to the tail.
	if n, err := q.RequeueDead(); n != 1 || err != nil {
		t.Fatalf("RequeueDead = %d, %v; want 1, nil", n, err)
	}
	es, err := q.Peek(10)
	if err != nil || len(es) != 1 || es[0].Item == nil || es[0].Item.Ret["id"] != "bad" {
		t.Fatalf("after requeue: peek %+v, %v; want the refused row", es, err)
	}
	if q.Dead() != 0 {
		t.Fatalf("after requeue: dead %d, want 0", q.Dead())
	}
	if dl, _ := q.DeadLetters(); len(dl) != 0 {
		t.Fatalf("after requeue: dead letters %+v, want none", dl)
	}
}

func TestSpoolBoundAndDurability(t *testing.T) {
	dir := t.TempDir()
	q, err := OpenSpool(dir, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := q.Push(&Item{Kind: KindRet, Ret: map[string]any{"i": int64(i), "f": 1.5}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Push(&Item{Kind: KindRet}); !errors.Is(err, ErrFull) {
		t.Fatalf("push into a full queue: got %v, want ErrFull", err)
	}
	q.Close()
	q, err = OpenSpool(dir, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	es, err := q.Peek(10)
	if err != nil || len(es) != 3 {
		t.Fatalf("peek after reopen: %d items, %v; want 3", len(es), err)
	}
	if es[2].Item.Ret["i"] != int64(2) || es[2].Item.Ret["f"] != 1.5 {
		t.Fatalf("item 2 = %#v, want i int64(2), f 1.5", es[2].Item.Ret)
	}
	if err := q.Ack(es[0].Seq); err != nil || q.Depth() != 2 {
		t.Fatalf("ack: %v, depth %d; want 2", err, q.Depth())
	}
	// An ack survives a reopen, and a torn last line (a crash mid-write)
	// is skipped.
	q.Close()
	f, err := os.OpenFile(filepath.Join(dir, "q.spool"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"p":99,"i":{"k":"re`)
	f.Close()
	q, err = OpenSpool(dir, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	es, err = q.Peek(10)
	if err != nil || len(es) != 2 || es[0].Item.Ret["i"] != int64(1) {
		t.Fatalf("after ack and reopen: %+v, %v; want items 1 and 2", es, err)
	}
	if err := q.Push(&Item{Kind: KindRet, Ret: map[string]any{"i": int64(3)}}); err != nil {
		t.Fatalf("push after a torn line: %v", err)
	}
	if es, _ := q.Peek(10); len(es) != 3 || es[2].Seq <= es[1].Seq {
		t.Fatalf("after push: %+v, want 3 items in order", es)
	}
}

// Items with a ret_config or ret_kwargs go to an instance opened with
// them, one per (ret_config, kwargs), kept open at most MaxAlt, and closed
// when the worker stops.
func TestWorkerAltInstances(t *testing.T) {
	q, err := OpenSpool(t.TempDir(), "alt", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	plain := &fake{}
	var mu sync.Mutex
	opened := map[string]*fake{}
	closed := 0
	w := NewWorker("alt", q, plain, zaptest.NewLogger(t))
	w.Alt = func(_ context.Context, rc string, kw map[string]any) (Returner, error) {
		mu.Lock()
		defer mu.Unlock()
		f := &fake{onClose: func() { mu.Lock(); closed++; mu.Unlock() }}
		opened[fmt.Sprintf("%s|%v", rc, kw)] = f
		return f, nil
	}
	items := []*Item{
		{Kind: KindRet, Ret: map[string]any{"id": "p"}},
		{Kind: KindRet, Ret: map[string]any{"id": "a1"}, RetConfig: "alternative"},
		{Kind: KindRet, Ret: map[string]any{"id": "a2"}, RetConfig: "alternative"},
		{Kind: KindRet, Ret: map[string]any{"id": "k"}, RetConfig: "alternative", RetKwargs: map[string]any{"n": 1}},
	}
	for i := range MaxAlt + 1 {
		items = append(items, &Item{Kind: KindRet, Ret: map[string]any{"id": "x"}, RetKwargs: map[string]any{"i": i}})
	}
	if err := q.Push(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	waitFor(t, "delivery", func() bool { return q.Depth() == 0 })
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(plain.ids()); got != "[p]" {
		t.Errorf("plain instance got %s, want [p]", got)
	}
	if got := fmt.Sprint(opened["alternative|map[]"].ids()); got != "[a1 a2]" {
		t.Errorf("alternative instance got %s, want [a1 a2] (one instance for both)", got)
	}
	if got := fmt.Sprint(opened["alternative|map[n:1]"].ids()); got != "[k]" {
		t.Errorf("alternative+kwargs instance got %s, want [k]", got)
	}
	if len(opened) != MaxAlt+3 || closed != MaxAlt+3 {
		t.Errorf("opened %d, closed %d instances; want %d of each", len(opened), closed, MaxAlt+3)
	}
}

func TestCheck(t *testing.T) {
	RegisterCaps("test_plain", Caps{}, func(context.Context, Config) (Returner, error) { return &fake{}, nil })
	for _, c := range []struct {
		name string
		role Role
		want error
	}{
		{"nosuch", RoleReturn, ErrUnknown},
		{"test_plain", RoleJobCache, ErrLacks},
		{"test_plain", RoleEvent, ErrLacks},
		{"test_plain", RoleReturn, nil},
	} {
		err := Check(c.name, c.role)
		if !errors.Is(err, c.want) {
			t.Errorf("Check(%s, %s) = %v, want %v", c.name, c.role, err, c.want)
		}
		if err != nil && !containsName(err.Error(), c.name) {
			t.Errorf("Check(%s) error %q does not name it", c.name, err)
		}
	}
}

func containsName(s, name string) bool { return strings.Contains(s, `"`+name+`"`) }

func TestJIDToTime(t *testing.T) {
	if got, want := JIDToTime("20150330121011408195"), "2015, Mar 30 12:10:11.408195"; got != want {
		t.Fatalf("JIDToTime = %q, want %q", got, want)
	}
}
