package mysql

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	driver "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDB makes a database of its own on the local MariaDB (root, no
// password) and returns the options naming it; it is dropped at the end.
func testDB(t *testing.T) (returners.Config, *sql.DB) {
	t.Helper()
	c := driver.NewConfig()
	c.User, c.Net, c.Addr = "root", "tcp", "127.0.0.1:3306"
	admin, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	name := "halite_t_" + rettest.Unique()
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("MariaDB at 127.0.0.1:3306 does not answer (run tools/ci/services.sh): %v", err)
	}
	c.DBName = name
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		admin.Exec("DROP DATABASE " + name)
		admin.Close()
	})
	return returners.Config{Opts: map[string]any{
		"mysql.host": "127.0.0.1", "mysql.user": "root", "mysql.pass": "", "mysql.db": name, "mysql.port": 3306,
	}, MasterID: "m1"}, db
}

func open(t *testing.T, cfg returners.Config, role returners.Role) returners.Returner {
	t.Helper()
	r, err := returners.Open(context.Background(), "mysql", role, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestJobCache(t *testing.T) {
	cfg, db := testDB(t)
	r := open(t, cfg, returners.RoleJobCache).(returners.JobCache)
	rettest.JobCache(t, r, func(jid, id string) int {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM salt_returns WHERE jid=? AND id=?", jid, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
	var fun, ret string
	if err := db.QueryRow("SELECT fun, `return` FROM salt_returns WHERE id='web1' AND fun='cmd.run'").Scan(&fun, &ret); err != nil || ret != `" 10:00 up 3 days"` {
		t.Fatalf("salt_returns row: fun %q return %s (%v); want cmd.run and the JSON uptime string", fun, ret, err)
	}
}

func TestEventReturn(t *testing.T) {
	cfg, db := testDB(t)
	r := open(t, cfg, returners.RoleEvent).(returners.EventReturner)
	sent := rettest.Events(t, r, 2500, 1500)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM salt_events WHERE master_id='m1'").Scan(&n); err != nil || n != len(sent) {
		t.Fatalf("salt_events: got %d rows (%v), want %d", n, err, len(sent))
	}
}

func TestRefusedRowIsPermanent(t *testing.T) {
	cfg, _ := testDB(t)
	r := open(t, cfg, returners.RoleReturn)
	err := r.Returner(rettest.Ctx(t), rettest.Ret(rettest.JID(0), "web1", strings.Repeat("f", 60), true))
	if !returners.IsPermanent(err) {
		t.Fatalf("returner with a 60-byte fun: got %v, want a Permanent error", err)
	}
}
