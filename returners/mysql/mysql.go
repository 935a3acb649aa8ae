// Package mysql is the mysql returner (MySQL and MariaDB): Salt's schema
// (jids, salt_returns, salt_events), created when missing. It registers
// itself as "mysql" and can be the master job cache.
//
// Options, as in Salt: mysql.host (salt), mysql.port (3306), mysql.user
// (salt), mysql.pass (salt), mysql.db (salt), mysql.unix_socket.
//
// (jid, id) is the idempotency key: a return is inserted only when the
// pair is not in salt_returns yet.
package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("mysql", returners.Caps{JobCache: true, Event: true}, New)
}

// Schema is Salt's mysql schema (utf8mb4 rather than utf8).
var Schema = []string{
	"CREATE TABLE IF NOT EXISTS `jids` (`jid` varchar(255) NOT NULL, `load` mediumtext NOT NULL, UNIQUE KEY `jid` (`jid`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
	"CREATE TABLE IF NOT EXISTS `salt_returns` (`fun` varchar(50) NOT NULL, `jid` varchar(255) NOT NULL, `return` mediumtext NOT NULL, `id` varchar(255) NOT NULL, `success` varchar(10) NOT NULL, `full_ret` mediumtext NOT NULL, `alter_time` TIMESTAMP DEFAULT CURRENT_TIMESTAMP, KEY `id` (`id`), KEY `jid` (`jid`), KEY `fun` (`fun`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
	"CREATE TABLE IF NOT EXISTS `salt_events` (`id` BIGINT NOT NULL AUTO_INCREMENT, `tag` varchar(255) NOT NULL, `data` mediumtext NOT NULL, `alter_time` TIMESTAMP DEFAULT CURRENT_TIMESTAMP, `master_id` varchar(255) NOT NULL, PRIMARY KEY (`id`), KEY `tag` (`tag`)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
}

// Returner is the mysql returner.
type Returner struct {
	db       *sql.DB
	masterID string
	schemaOK atomic.Bool // set once the schema (stream) is there
}

// DSNConfig builds the driver's config from the options.
func DSNConfig(cfg returners.Config) (*driver.Config, error) {
	o := cfg.Options("mysql", "returner.mysql")
	port, err := o.Int("port", 3306)
	if err != nil {
		return nil, err
	}
	c := driver.NewConfig()
	c.User = o.String("user", "salt")
	c.Passwd = o.String("pass", "salt")
	c.DBName = o.String("db", "salt")
	c.Net, c.Addr = "tcp", net.JoinHostPort(o.String("host", "salt"), strconv.Itoa(port))
	if s := o.String("unix_socket", ""); s != "" {
		c.Net, c.Addr = "unix", s
	}
	c.Timeout = 5 * time.Second
	c.ParseTime = true
	c.Collation = "utf8mb4_general_ci"
	c.Params = map[string]string{"sql_mode": "'STRICT_ALL_TABLES'"}
	return c, nil
}

// New opens the pool; the schema is made at the first use that reaches
// the server.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	c, err := DSNConfig(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := driver.NewConnector(c)
	if err != nil {
		return nil, fmt.Errorf("mysql options: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(8)
	db.SetConnMaxIdleTime(time.Minute)
	return &Returner{db: db, masterID: cfg.MasterID}, nil
}

// Close closes the pool.
func (r *Returner) Close() error { return r.db.Close() }

func (r *Returner) schema(ctx context.Context) error {
	if r.schemaOK.Load() {
		return nil
	}
	for _, q := range Schema {
		if _, err := r.db.ExecContext(ctx, q); err != nil {
			return wrap("create schema", err)
		}
	}
	r.schemaOK.Store(true)
	return nil
}

// permanentCodes are server errors about the row itself: data too long,
// bad string, out of range, bad JSON, packet too large, bad null.
var permanentCodes = map[uint16]bool{1406: true, 1366: true, 1264: true, 3140: true, 1153: true, 1048: true, 1301: true}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *driver.MySQLError
	if (errors.As(err, &me) && permanentCodes[me.Number]) || errors.Is(err, driver.ErrPktTooLarge) {
		return returners.Permanent(fmt.Errorf("mysql %s: %w", op, err))
	}
	return fmt.Errorf("mysql %s: %w", op, err)
}

// Returner is mysql.returner, idempotent on (jid, id).
func (r *Returner) Returner(ctx context.Context, ret map[string]any) error {
	if err := r.schema(ctx); err != nil {
		return err
	}
	full, err := returners.MarshalJSON(ret)
	if err != nil {
		return err
	}
	rv, err := returners.MarshalJSON(ret["return"])
	if err != nil {
		return err
	}
	succ := "0"
	if returners.Truthy(ret, "success") {
		succ = "1"
	}
	jid, id := returners.Str(ret, "jid"), returners.Str(ret, "id")
	_, err = r.db.ExecContext(ctx, "INSERT INTO `salt_returns` (`fun`, `jid`, `return`, `id`, `success`, `full_ret`) "+
		"SELECT ?, ?, ?, ?, ?, ? FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM `salt_returns` WHERE `jid` = ? AND `id` = ?)",
		returners.Str(ret, "fun"), jid, string(rv), id, succ, string(full), jid, id)
	return wrap("returner", err)
}

// PrepJID returns passed, or a new jid.
func (r *Returner) PrepJID(_ context.Context, _ bool, passed string) (string, error) {
	return returners.PrepJID(passed), nil
}

// SaveLoad is mysql.save_load; a load already saved is kept.
func (r *Returner) SaveLoad(ctx context.Context, jid string, load map[string]any, _ []string) error {
	if err := r.schema(ctx); err != nil {
		return err
	}
	b, err := returners.MarshalJSON(load)
	if err != nil {
		return err
	}
	_, err = r.db.ExecContext(ctx, "INSERT INTO `jids` (`jid`, `load`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `jid` = `jid`", jid, string(b))
	return wrap("save_load", err)
}

// SaveMinions does nothing, as in Salt's mysql returner.
func (r *Returner) SaveMinions(context.Context, string, []string) error { return nil }

func decode(s string) (map[string]any, error) {
	out := map[string]any{}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return returners.Numbers(out), nil
}

// GetLoad is mysql.get_load.
func (r *Returner) GetLoad(ctx context.Context, jid string) (map[string]any, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	var s string
	err := r.db.QueryRowContext(ctx, "SELECT `load` FROM `jids` WHERE `jid` = ?", jid).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, wrap("get_load", err)
	}
	return decode(s)
}

func (r *Returner) byKey(ctx context.Context, op, q string, args ...any) (map[string]map[string]any, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var k, s string
		if err := rows.Scan(&k, &s); err != nil {
			return nil, wrap(op, err)
		}
		if out[k], err = decode(s); err != nil {
			return nil, fmt.Errorf("mysql %s: %w", op, err)
		}
	}
	return out, wrap(op, rows.Err())
}

// GetJID is mysql.get_jid.
func (r *Returner) GetJID(ctx context.Context, jid string) (map[string]map[string]any, error) {
	return r.byKey(ctx, "get_jid", "SELECT `id`, `full_ret` FROM `salt_returns` WHERE `jid` = ?", jid)
}

// GetFun is mysql.get_fun: minion -> the full return of its last job of
// fun.
func (r *Returner) GetFun(ctx context.Context, fun string) (map[string]any, error) {
	m, err := r.byKey(ctx, "get_fun", "SELECT s.`id`, s.`full_ret` FROM `salt_returns` s JOIN "+
		"(SELECT MAX(`jid`) AS jid, `id` FROM `salt_returns` WHERE `fun` = ? GROUP BY `id`) last "+
		"ON s.`jid` = last.jid AND s.`id` = last.`id` WHERE s.`fun` = ?", fun, fun)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// GetJIDs is mysql.get_jids.
func (r *Returner) GetJIDs(ctx context.Context) (map[string]map[string]any, error) {
	m, err := r.byKey(ctx, "get_jids", "SELECT `jid`, `load` FROM `jids`")
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(m))
	for jid, load := range m {
		out[jid] = returners.FormatJIDInstance(jid, load)
	}
	return out, nil
}

// GetMinions is mysql.get_minions.
func (r *Returner) GetMinions(ctx context.Context) ([]string, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	rows, err := r.db.QueryContext(ctx, "SELECT DISTINCT `id` FROM `salt_returns` ORDER BY `id`")
	if err != nil {
		return nil, wrap("get_minions", err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, wrap("get_minions", err)
		}
		ids = append(ids, id)
	}
	return ids, wrap("get_minions", rows.Err())
}

// CleanOldJobs is mysql.clean_old_jobs (without archiving).
func (r *Returner) CleanOldJobs(ctx context.Context, keep time.Duration) error {
	if keep <= 0 {
		return nil
	}
	if err := r.schema(ctx); err != nil {
		return err
	}
	cut := time.Now().Add(-keep).UTC()
	for _, q := range []string{
		"DELETE FROM `jids` WHERE `jid` IN (SELECT * FROM (SELECT DISTINCT `jid` FROM `salt_returns` WHERE `alter_time` < ?) t)",
		"DELETE FROM `salt_returns` WHERE `alter_time` < ?",
		"DELETE FROM `salt_events` WHERE `alter_time` < ?",
	} {
		if _, err := r.db.ExecContext(ctx, q, cut); err != nil {
			return wrap("clean_old_jobs", err)
		}
	}
	return nil
}

// EventReturn is mysql.event_return, one multi-row INSERT a batch.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	if err := r.schema(ctx); err != nil {
		return err
	}
	for len(events) > 0 {
		n := min(len(events), 1000)
		var sb strings.Builder
		sb.WriteString("INSERT INTO `salt_events` (`tag`, `data`, `master_id`) VALUES ")
		args := make([]any, 0, 3*n)
		for i, ev := range events[:n] {
			b, err := returners.MarshalJSON(ev.Data)
			if err != nil {
				return err
			}
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?, ?)")
			args = append(args, ev.Tag, string(b), r.masterID)
		}
		if _, err := r.db.ExecContext(ctx, sb.String(), args...); err != nil {
			return wrap("event_return", err)
		}
		events = events[n:]
	}
	return nil
}
