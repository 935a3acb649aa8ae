package pgjsonb

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDB makes a database of its own on the local server (trust auth, user
// postgres) and returns the options naming it; it is dropped at the end.
func testDB(t *testing.T) (returners.Config, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres?connect_timeout=5")
	if err != nil {
		t.Fatalf("PostgreSQL at 127.0.0.1:5432 does not answer (run tools/ci/services.sh): %v", err)
	}
	name := "halite_t_" + rettest.Unique()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
		admin.Close(ctx)
	})
	cfg := returners.Config{Opts: map[string]any{
		"returner.pgjsonb.host": "127.0.0.1", "returner.pgjsonb.user": "postgres", "returner.pgjsonb.pass": "",
		"returner.pgjsonb.db": name, "returner.pgjsonb.port": 5432, "returner.pgjsonb.sslmode": "disable",
	}, MasterID: "m1", Log: zaptest.NewLogger(t)}
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return cfg, conn
}

func open(t *testing.T, cfg returners.Config, role returners.Role) returners.Returner {
	t.Helper()
	r, err := returners.Open(context.Background(), "pgjsonb", role, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestJobCache(t *testing.T) {
	cfg, conn := testDB(t)
	r := open(t, cfg, returners.RoleJobCache).(returners.JobCache)
	rettest.JobCache(t, r, func(jid, id string) int {
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM salt_returns WHERE jid=$1 AND id=$2", jid, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
	// Salt's columns, as Salt's tools read them.
	var fun, success string
	var ret []byte
	err := conn.QueryRow(context.Background(), "SELECT fun, success, full_ret->'return' FROM salt_returns WHERE id='web1' AND fun='cmd.run'").Scan(&fun, &success, &ret)
	if err != nil || fun != "cmd.run" || success != "true" || string(ret) != `" 10:00 up 3 days"` {
		t.Fatalf("salt_returns row: fun %q success %q full_ret->return %s (%v); want cmd.run, true, the uptime string", fun, success, ret, err)
	}
}

func TestEventReturn(t *testing.T) {
	cfg, conn := testDB(t)
	r := open(t, cfg, returners.RoleEvent).(returners.EventReturner)
	sent := rettest.Events(t, r, 2500, 1000)
	var n int
	var master string
	if err := conn.QueryRow(context.Background(), "SELECT count(*), min(master_id) FROM salt_events WHERE tag LIKE 'halite/test/%'").Scan(&n, &master); err != nil {
		t.Fatal(err)
	}
	if n != len(sent) || master != "m1" {
		t.Fatalf("salt_events: got %d rows from %q, want %d from m1", n, master, len(sent))
	}
	var data int
	if err := conn.QueryRow(context.Background(), "SELECT (data->>'n')::int FROM salt_events WHERE tag = 'halite/test/2499'").Scan(&data); err != nil || data != 2499 {
		t.Fatalf("event halite/test/2499 data.n = %d (%v), want 2499", data, err)
	}
}

// A row the server refuses for what it is (a NUL in JSON text, which jsonb
// cannot hold) is a Permanent error: it goes to the dead letters.
func TestRefusedRowIsPermanent(t *testing.T) {
	cfg, _ := testDB(t)
	r := open(t, cfg, returners.RoleReturn)
	err := r.Returner(rettest.Ctx(t), rettest.Ret(rettest.JID(0), "web1", "test.echo", "a\x00b"))
	if err == nil || !returners.IsPermanent(err) {
		t.Fatalf("returner with a NUL: got %v, want a Permanent error", err)
	}
	// A fun longer than varchar(50) too.
	err = r.Returner(rettest.Ctx(t), rettest.Ret(rettest.JID(0), "web1", strings.Repeat("f", 60), true))
	if !returners.IsPermanent(err) {
		t.Fatalf("returner with a 60-byte fun: got %v, want a Permanent error", err)
	}
}

func TestServerDownIsTransient(t *testing.T) {
	cfg := returners.Config{Opts: map[string]any{"returner.pgjsonb.host": "127.0.0.1", "returner.pgjsonb.port": 1}}
	r := open(t, cfg, returners.RoleReturn)
	err := r.Returner(rettest.Ctx(t), rettest.Ret(rettest.JID(0), "web1", "test.ping", true))
	if err == nil || returners.IsPermanent(err) {
		t.Fatalf("returner to a closed port: got %v, want a transient error", err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		t.Fatalf("got a server error %v from a closed port", pe)
	}
}
