package redis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/queue"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shared returns options for the machine's Redis under a key prefix of
// the test's own, and a client; the prefix's keys are deleted at the end.
func shared(t *testing.T) (returners.Config, *goredis.Client, string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	if err := c.Ping(context.Background()).Err(); err != nil {
		c.Close()
		t.Fatalf("Redis at 127.0.0.1:6379 does not answer (run tools/ci/services.sh): %v", err)
	}
	prefix := "halite-test-" + rettest.Unique() + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		c.Close()
	})
	return returners.Config{Opts: map[string]any{"redis.host": "127.0.0.1", "redis.port": 6379, "redis.key_prefix": prefix},
		MasterID: "m1", KeepJobs: time.Hour}, c, prefix
}

func open(t *testing.T, cfg returners.Config, role returners.Role) returners.Returner {
	t.Helper()
	r, err := returners.Open(context.Background(), "redis", role, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestJobCache(t *testing.T) {
	cfg, c, prefix := shared(t)
	r := open(t, cfg, returners.RoleJobCache).(returners.JobCache)
	rettest.JobCache(t, r, func(jid, id string) int {
		n, err := c.HLen(context.Background(), prefix+"ret:"+jid).Result()
		if err != nil {
			t.Fatal(err)
		}
		// One field per minion: web1 and web2 for the first job.
		return int(n) - 1
	})
	// Salt's key layout, as redis-cli shows it.
	ctx := context.Background()
	for _, k := range []string{"minions", "web1:cmd.run"} {
		if n, _ := c.Exists(ctx, prefix+k).Result(); n != 1 {
			t.Errorf("key %s%s: missing", prefix, k)
		}
	}
	keys, _ := c.Keys(ctx, prefix+"load:*").Result()
	if len(keys) != 2 {
		t.Errorf("load:* keys: got %v, want 2", keys)
	}
	if ttl, _ := c.TTL(ctx, keys[0]).Result(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("TTL of %s: got %v, want keep_jobs (1h)", keys[0], ttl)
	}
}

func TestEventReturn(t *testing.T) {
	cfg, c, prefix := shared(t)
	r := open(t, cfg, returners.RoleEvent).(returners.EventReturner)
	sent := rettest.Events(t, r, 3000, 1000)
	msgs, err := c.XRange(context.Background(), prefix+"salt_events", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != len(sent) {
		t.Fatalf("salt_events stream: got %d entries, want %d", len(msgs), len(sent))
	}
	if msgs[7].Values["tag"] != "halite/test/7" || msgs[7].Values["data"] != `{"_stamp":"x","n":7}` || msgs[7].Values["master_id"] != "m1" {
		t.Fatalf("entry 7 = %v, want tag halite/test/7, data {\"_stamp\":\"x\",\"n\":7}, master_id m1", msgs[7].Values)
	}
}

// ownServer runs a redis-server of the test's own on a free port, so that
// it can be stopped and started under load.
type ownServer struct {
	t    *testing.T
	port int
	dir  string
	cmd  *exec.Cmd
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *ownServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--save", "60 1",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr()})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			s.t.Fatal("own redis-server did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *ownServer) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func (s *ownServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// The backend goes away mid-run and comes back; then the master (here: the
// queue and worker) restarts with items still queued. Nothing is lost and
// nothing is duplicated.
func TestBackendDownAndRestartLoseNothing(t *testing.T) {
	srv := &ownServer{t: t, port: freePort(t), dir: t.TempDir()}
	srv.start()
	t.Cleanup(srv.stop)
	cfg := returners.Config{Opts: map[string]any{"redis.host": "127.0.0.1", "redis.port": srv.port}, KeepJobs: time.Hour}
	qpath := filepath.Join(t.TempDir(), "redis.queue")
	jid := rettest.JID(0)
	log := zaptest.NewLogger(t)

	var w *returners.Worker
	run := func() (q *queue.Queue, stop func()) {
		r := open(t, cfg, returners.RoleReturn)
		q, err := queue.Open(qpath, 0)
		if err != nil {
			t.Fatal(err)
		}
		w = returners.NewWorker("redis", q, r, log)
		w.MinBackoff, w.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		return q, func() { cancel(); <-done; q.Close() }
	}
	push := func(q *queue.Queue, from, to int) {
		for i := from; i < to; i++ {
			if err := q.Push(&returners.Item{Kind: returners.KindRet, Ret: rettest.Ret(jid, fmt.Sprintf("m%04d", i), "test.ping", true)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.addr()})
	defer c.Close()
	count := func() int64 {
		n, _ := c.HLen(context.Background(), "ret:"+jid).Result()
		return n
	}
	waitCount := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for count() != want {
			if time.Now().After(deadline) {
				t.Fatalf("ret:%s has %d returns, want %d", jid, count(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// 1. Delivering; the server is stopped mid-run and items keep coming.
	q, stop := run()
	push(q, 0, 200)
	waitCount(200)
	srv.stop()
	push(q, 200, 400)
	deadline := time.Now().Add(30 * time.Second)
	for st := w.Status(); !st.Retrying || st.Failures < 2; st = w.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("worker status with the server down: %+v, want retrying", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.start()
	waitCount(400)
	// The rows are in before the worker acknowledges them in its queue;
	// wait for the acks, so the depth below counts only new items (an
	// item written but not yet acked would be sent again: at least once).
	deadline = time.Now().Add(30 * time.Second)
	for q.Depth() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queue depth with every row delivered: %d, want 0", q.Depth())
		}
		time.Sleep(10 * time.Millisecond)
	}

	// 2. A restart with a non-empty queue: the server goes down, items are
	// queued, the worker (the master) stops; it is started again, then the
	// server comes back.
	srv.stop()
	push(q, 400, 500)
	stop()
	q, stop = run()
	if d := q.Depth(); d != 100 {
		t.Fatalf("queue depth after restart: got %d, want 100", d)
	}
	srv.start()
	waitCount(500)
	// As above: the last rows are in before their acks; wait for them, or
	// an item written but not yet acked stays queued (sent again: at
	// least once), which is not what this counts.
	deadline = time.Now().Add(30 * time.Second)
	for q.Depth() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queue depth with every row delivered after the restart: %d, want 0", q.Depth())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	q, err := queue.Open(qpath, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if d := q.Depth(); d != 0 {
		t.Fatalf("queue depth after delivery: got %d, want 0", d)
	}
}
