package master

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

// pgTestDB makes a PostgreSQL database of the test's own and returns its
// name and a connection to it.
func pgTestDB(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres?connect_timeout=5")
	if err != nil {
		t.Fatalf("PostgreSQL at 127.0.0.1:5432 does not answer (run tools/ci/services.sh): %v", err)
	}
	name := "halite_m_" + rettest.Unique()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close(ctx)
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	return name, conn
}

func TestReturnersWiring(t *testing.T) {
	db, pg := pgTestDB(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Redis at 127.0.0.1:6379 does not answer (run tools/ci/services.sh): %v", err)
	}
	prefix := "halite-m-" + rettest.Unique() + ":"
	defer func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	}()
	rawfile := filepath.Join(t.TempDir(), "returns.json")
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.MasterJobCache = "pgjsonb"
		c.EventReturn = []string{"redis"}
		c.EventReturnWhitelist = []string{"salt/job/*", "halite/test/*"}
		c.EventReturnBlacklist = []string{"salt/job/*/ret/db1"}
		for k, v := range map[string]any{
			"returner.pgjsonb.host": "127.0.0.1", "returner.pgjsonb.user": "postgres", "returner.pgjsonb.pass": "",
			"returner.pgjsonb.db": db, "returner.pgjsonb.sslmode": "disable",
			"redis.host": "127.0.0.1", "redis.key_prefix": prefix,
			"rawfile_json.filename": rawfile,
		} {
			c.Raw[k] = v
		}
	}, nil)
	tm.startAgent(t, "web1", nil)
	tm.startAgent(t, "db1", nil)
	tm.waitConnected(t, "web1", "db1")

	job, rets, _ := returnsOf(t, tm.publish(t, &api.Request{Tgt: "*", Fun: "test.echo", Arg: []any{"hi"}, Ret: "rawfile_json"}))
	if len(rets) != 2 {
		t.Fatalf("returns: got %d, want 2", len(rets))
	}
	jid := job.JID
	ctx := context.Background()

	// --return rawfile_json: one line a return.
	waitFor(t, "two returns in "+rawfile, func() bool {
		b, _ := os.ReadFile(rawfile)
		return strings.Count(string(b), "\n") == 2
	})
	f, _ := os.Open(rawfile)
	s := bufio.NewScanner(f)
	for s.Scan() {
		var m map[string]any
		if err := json.Unmarshal(s.Bytes(), &m); err != nil || m["jid"] != jid || m["return"] != "hi" {
			t.Errorf("rawfile_json line %s (%v): want jid %s, return hi", s.Text(), err, jid)
		}
	}
	f.Close()

	// master_job_cache: pgjsonb holds the load and the returns, and the
	// jobs runners read them from there.
	waitFor(t, "both returns in salt_returns", func() bool {
		var n int
		pg.QueryRow(ctx, "SELECT count(*) FROM salt_returns WHERE jid=$1", jid).Scan(&n)
		return n == 2
	})
	var loadFun string
	if err := pg.QueryRow(ctx, "SELECT load->>'fun' FROM jids WHERE jid=$1", jid).Scan(&loadFun); err != nil || loadFun != "test.echo" {
		t.Fatalf("jids row of %s: fun %q (%v), want test.echo", jid, loadFun, err)
	}
	// Take the embedded cache out of the way: what the runners show now
	// comes from PostgreSQL.
	if _, err := tm.cache.CleanOld(1, farFuture()); err != nil {
		t.Fatal(err)
	}
	looked := dict(t, tm.run(t, "jobs.lookup_jid", jid))
	if looked["web1"] != "hi" || looked["db1"] != "hi" {
		t.Fatalf("jobs.lookup_jid from pgjsonb = %v, want hi from web1 and db1", looked)
	}
	if jobs := dict(t, tm.run(t, "jobs.list_jobs")); dict(t, jobs[jid])["Function"] != "test.echo" {
		t.Fatalf("jobs.list_jobs from pgjsonb lacks %s: %v", jid, jobs)
	}

	// ret.* runners.
	if got := dict(t, tm.run(t, "ret.get_jid", "pgjsonb", jid)); dict(t, got["web1"])["return"] != "hi" {
		t.Fatalf("ret.get_jid = %v, want web1's return hi", got)
	}
	if got := dict(t, tm.run(t, "ret.get_jids", "pgjsonb")); got[jid] == nil {
		t.Fatalf("ret.get_jids lacks %s: %v", jid, got)
	}
	if got := strs(t, tm.run(t, "ret.get_minions", "pgjsonb")); strings.Join(got, ",") != "db1,web1" {
		t.Fatalf("ret.get_minions = %v, want [db1 web1]", got)
	}
	if got := dict(t, tm.run(t, "ret.get_fun", "pgjsonb", "test.echo")); len(got) != 2 {
		t.Fatalf("ret.get_fun = %v, want web1 and db1", got)
	}
	if _, err := tm.call(t, api.OpRunner, "ret.get_jids", []any{"rawfile_json"}, nil); err == nil || !strings.Contains(err.Error(), "rawfile_json") {
		t.Fatalf("ret.get_jids rawfile_json: got %v, want an error naming it", err)
	}

	// event_return into Redis, after the whitelist and blacklist.
	tm.run(t, "event.send", "halite/test/kept", map[string]any{"k": 1})
	tm.run(t, "event.send", "other/dropped")
	tags := map[string]bool{}
	waitFor(t, "events in the salt_events stream", func() bool {
		msgs, _ := rdb.XRange(ctx, prefix+"salt_events", "-", "+").Result()
		for _, m := range msgs {
			tags[m.Values["tag"].(string)] = true
		}
		return tags["halite/test/kept"] && tags["salt/job/"+jid+"/ret/web1"]
	})
	for _, tag := range []string{"salt/job/" + jid + "/ret/db1", "other/dropped"} {
		if tags[tag] {
			t.Errorf("event %s was returned; the whitelist or blacklist should have kept it out", tag)
		}
	}
	if !tags["salt/job/"+jid+"/new"] {
		t.Errorf("event salt/job/%s/new missing from the stream: %v", jid, tags)
	}

	st := dict(t, tm.run(t, "returners.status"))
	for _, n := range []string{"pgjsonb", "redis", "rawfile_json"} {
		e := dict(t, st[n])
		if d, _ := toInt(e["delivered"]); d == 0 {
			t.Errorf("returners.status %s = %v, want some delivered", n, e)
		}
	}
}

func TestReturnerConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*config.Master)
		want string
	}{
		{"unknown job cache", func(c *config.Master) { c.MasterJobCache = "nosuch" }, `master_job_cache: returner "nosuch"`},
		{"job cache lacking functions", func(c *config.Master) { c.MasterJobCache = "rawfile_json" }, `returner "rawfile_json": returner lacks the functions`},
		{"unknown event returner", func(c *config.Master) { c.EventReturn = []string{"rawfile_json", "nope"} }, `event_return: returner "nope"`},
		{"ext_job_cache", func(c *config.Master) { c.ExtJobCache = []string{"bogus"} }, `ext_job_cache: returner "bogus"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := config.DefaultMaster()
			cfg.PkiDir, cfg.CacheDir, cfg.SockDir = filepath.Join(dir, "pki"), filepath.Join(dir, "cache"), dir
			cfg.Raw = map[string]any{}
			c.set(cfg)
			m, err := New(cfg, zaptest.NewLogger(t))
			if err == nil {
				m.cache.Close()
				t.Fatalf("New: got no error, want one containing %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("New: got %q, want it to contain %q", err, c.want)
			}
		})
	}
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "web1", nil)
	tm.waitConnected(t, "web1")
	req := &api.Request{Op: api.OpPublish, Tgt: "*", Fun: "test.ping", Ret: "redis,nosuch"}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := api.Dial(ctx, tm.sock, req)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Next()
	c.Close()
	if err == nil && r.Kind == api.KindError {
		err = &api.RemoteError{Code: r.Code, Msg: r.Error}
	}
	if err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("publish --return redis,nosuch: got %v, want an error naming nosuch", err)
	}
}

// farFuture is a time after every job of the test, for CleanOld to purge
// them all.
func farFuture() time.Time { return time.Now().Add(1000 * time.Hour) }

// refuser is a returner that refuses every return for good until accept is
// set, for returners.requeue_dead.
type refuser struct {
	mu     sync.Mutex
	accept bool
	got    int
}

func (r *refuser) Returner(context.Context, map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.accept {
		return returners.Permanent(errors.New("refused"))
	}
	r.got++
	return nil
}
func (r *refuser) Close() error { return nil }

var testRefuser = &refuser{}

func init() {
	returners.Register("test_refuser", func(context.Context, returners.Config) (returners.Returner, error) { return testRefuser, nil })
}

func lines(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

func TestReturnConfigKwargsAndRequeue(t *testing.T) {
	dir := t.TempDir()
	plain, alt, kw := filepath.Join(dir, "plain.json"), filepath.Join(dir, "alt.json"), filepath.Join(dir, "kw.json")
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.Raw["rawfile_json.filename"] = plain
		c.Raw["alternative.rawfile_json.filename"] = alt
	}, nil)
	tm.startAgent(t, "web1", nil)
	tm.waitConnected(t, "web1")
	for _, c := range []struct {
		name string
		req  *api.Request
		file string
	}{
		{"plain", &api.Request{Tgt: "*", Fun: "test.ping", Ret: "rawfile_json"}, plain},
		{"return_config", &api.Request{Tgt: "*", Fun: "test.ping", Ret: "rawfile_json", ReturnConfig: "alternative"}, alt},
		{"return_kwargs win", &api.Request{Tgt: "*", Fun: "test.ping", Ret: "rawfile_json", ReturnConfig: "alternative",
			ReturnKwargs: map[string]any{"filename": kw}}, kw},
	} {
		before := map[string]int{plain: lines(plain), alt: lines(alt), kw: lines(kw)}
		returnsOf(t, tm.publish(t, c.req))
		waitFor(t, c.name+": a line in "+c.file, func() bool { return lines(c.file) == before[c.file]+1 })
		for _, f := range []string{plain, alt, kw} {
			if f != c.file && lines(f) != before[f] {
				t.Errorf("%s: %s got %d lines, want %d", c.name, f, lines(f), before[f])
			}
		}
	}

	// returners.requeue_dead: a refused return is set aside, then goes
	// back into the queue and is delivered.
	returnsOf(t, tm.publish(t, &api.Request{Tgt: "*", Fun: "test.ping", Ret: "test_refuser"}))
	waitFor(t, "a dead letter", func() bool {
		dl, _ := tm.run(t, "returners.dead_letters", "test_refuser").([]any)
		return len(dl) == 1
	})
	testRefuser.mu.Lock()
	testRefuser.accept = true
	testRefuser.mu.Unlock()
	got := dict(t, tm.run(t, "returners.requeue_dead", "test_refuser"))
	if n, _ := toInt(got["requeued"]); n != 1 {
		t.Fatalf("returners.requeue_dead = %v, want requeued 1", got)
	}
	waitFor(t, "the requeued return delivered", func() bool {
		testRefuser.mu.Lock()
		defer testRefuser.mu.Unlock()
		return testRefuser.got == 1
	})
	if dl, _ := tm.run(t, "returners.dead_letters", "test_refuser").([]any); len(dl) != 0 {
		t.Fatalf("dead letters after requeue: %v, want none", dl)
	}
}
