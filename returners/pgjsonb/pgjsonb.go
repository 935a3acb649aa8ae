// Package pgjsonb is the pgjsonb returner: Salt's PostgreSQL schema (jids,
// salt_returns, salt_events, with JSONB columns), created when missing. It
// registers itself as "pgjsonb" and can be the master job cache.
//
// Options, as in Salt (returner.pgjsonb.<attr>, or pgjsonb.<attr>):
// host (salt), port (5432), user (salt), pass (salt), db (salt), sslmode,
// sslcert, sslkey, sslrootcert.
//
// (jid, id) is the idempotency key of salt_returns: Halite adds a unique
// index on it (halite_salt_returns_jid_id) and inserts a return only when
// the pair is not there yet, so a retried insert adds no row.
package pgjsonb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("pgjsonb", returners.Caps{JobCache: true, Event: true}, New)
}

// Schema is Salt's pgjsonb schema, plus the (jid, id) unique index.
const Schema = `
CREATE TABLE IF NOT EXISTS jids (
  jid varchar(255) NOT NULL primary key,
  load jsonb NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_jids_jsonb on jids USING gin (load) WITH (fastupdate=on);
CREATE TABLE IF NOT EXISTS salt_returns (
  fun varchar(50) NOT NULL,
  jid varchar(255) NOT NULL,
  return jsonb NOT NULL,
  id varchar(255) NOT NULL,
  success varchar(10) NOT NULL,
  full_ret jsonb NOT NULL,
  alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW()
);
CREATE INDEX IF NOT EXISTS idx_salt_returns_id ON salt_returns (id);
CREATE INDEX IF NOT EXISTS idx_salt_returns_jid ON salt_returns (jid);
CREATE INDEX IF NOT EXISTS idx_salt_returns_fun ON salt_returns (fun);
CREATE INDEX IF NOT EXISTS idx_salt_returns_return ON salt_returns USING gin (return) with (fastupdate=on);
CREATE INDEX IF NOT EXISTS idx_salt_returns_full_ret ON salt_returns USING gin (full_ret) with (fastupdate=on);
CREATE TABLE IF NOT EXISTS salt_events (
  id BIGSERIAL NOT NULL UNIQUE,
  tag varchar(255) NOT NULL,
  data jsonb NOT NULL,
  alter_time TIMESTAMP WITH TIME ZONE DEFAULT NOW(),
  master_id varchar(255) NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_salt_events_tag on salt_events (tag);
CREATE INDEX IF NOT EXISTS idx_salt_events_data ON salt_events USING gin (data) with (fastupdate=on);
`

const uniqueIndex = `CREATE UNIQUE INDEX IF NOT EXISTS halite_salt_returns_jid_id ON salt_returns (jid, id)`

// Returner is the pgjsonb returner.
type Returner struct {
	pool     *pgxpool.Pool
	masterID string
	log      *zap.Logger
	schemaOK atomic.Bool // set once the schema (stream) is there
}

// DSN builds the connection string from the options.
func DSN(cfg returners.Config) (string, error) {
	o := cfg.Options("returner.pgjsonb", "pgjsonb")
	port, err := o.Int("port", 5432)
	if err != nil {
		return "", err
	}
	u := url.URL{
		Scheme: "postgres",
		User:   url.UserPassword(o.String("user", "salt"), o.String("pass", o.String("passwd", "salt"))),
		Host:   o.String("host", "salt") + ":" + strconv.Itoa(port),
		Path:   "/" + o.String("db", "salt"),
	}
	q := url.Values{}
	for _, k := range []string{"sslmode", "sslcert", "sslkey", "sslrootcert", "sslcrl"} {
		if v := o.String(k, ""); v != "" {
			q.Set(k, v)
		}
	}
	q.Set("connect_timeout", "5")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// New makes the pool; the schema is made at the first use that reaches
// the server, so a server that is down at start delays nothing.
func New(ctx context.Context, cfg returners.Config) (returners.Returner, error) {
	dsn, err := DSN(cfg)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgjsonb options: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("pgjsonb: %w", err)
	}
	return &Returner{pool: pool, masterID: cfg.MasterID, log: cfg.Log}, nil
}

// Close closes the pool.
func (r *Returner) Close() error {
	r.pool.Close()
	return nil
}

func (r *Returner) schema(ctx context.Context) error {
	if r.schemaOK.Load() {
		return nil
	}
	if _, err := r.pool.Exec(ctx, Schema); err != nil {
		return wrap("create schema", err)
	}
	if _, err := r.pool.Exec(ctx, uniqueIndex); err != nil {
		// A table Salt filled with duplicates cannot take the index;
		// the inserts below still skip a pair already there.
		r.log.Warn("pgjsonb: no unique index on salt_returns (jid, id)", zap.Error(err))
	}
	r.schemaOK.Store(true)
	return nil
}

// wrap marks the errors a retry cannot fix: data exceptions (class 22:
// bad encoding, a value too long) and program limits (class 54: too
// large).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "54")) {
		return returners.Permanent(fmt.Errorf("pgjsonb %s: %w", op, err))
	}
	return fmt.Errorf("pgjsonb %s: %w", op, err)
}

func success(ret map[string]any) string {
	if returners.Truthy(ret, "success") {
		return "true"
	}
	return "false"
}

// Returner is pgjsonb.returner, idempotent on (jid, id).
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
	_, err = r.pool.Exec(ctx, `INSERT INTO salt_returns (fun, jid, return, id, success, full_ret, alter_time)
SELECT $1, $2::varchar, $3, $4::varchar, $5, $6, now()
WHERE NOT EXISTS (SELECT 1 FROM salt_returns WHERE jid = $2::varchar AND id = $4::varchar)`,
		returners.Str(ret, "fun"), returners.Str(ret, "jid"), string(rv), returners.Str(ret, "id"), success(ret), string(full))
	return wrap("returner", err)
}

// PrepJID returns passed, or a new jid.
func (r *Returner) PrepJID(_ context.Context, _ bool, passed string) (string, error) {
	return returners.PrepJID(passed), nil
}

// SaveLoad is pgjsonb.save_load; a load already saved is kept.
func (r *Returner) SaveLoad(ctx context.Context, jid string, load map[string]any, _ []string) error {
	if err := r.schema(ctx); err != nil {
		return err
	}
	b, err := returners.MarshalJSON(load)
	if err != nil {
		return err
	}
	_, err = r.pool.Exec(ctx, `INSERT INTO jids (jid, load) VALUES ($1, $2) ON CONFLICT (jid) DO NOTHING`, jid, string(b))
	return wrap("save_load", err)
}

// SaveMinions does nothing, as in Salt's pgjsonb.
func (r *Returner) SaveMinions(context.Context, string, []string) error { return nil }

func decode(b []byte) (map[string]any, error) {
	out := map[string]any{}
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return returners.Numbers(out), nil
}

// GetLoad is pgjsonb.get_load.
func (r *Returner) GetLoad(ctx context.Context, jid string) (map[string]any, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	var b []byte
	err := r.pool.QueryRow(ctx, `SELECT load FROM jids WHERE jid = $1`, jid).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, wrap("get_load", err)
	}
	return decode(b)
}

func (r *Returner) byID(ctx context.Context, op, sql string, arg any) (map[string]map[string]any, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	rows, err := r.pool.Query(ctx, sql, arg)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var id string
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return nil, wrap(op, err)
		}
		if out[id], err = decode(b); err != nil {
			return nil, fmt.Errorf("pgjsonb %s: %w", op, err)
		}
	}
	return out, wrap(op, rows.Err())
}

// GetJID is pgjsonb.get_jid.
func (r *Returner) GetJID(ctx context.Context, jid string) (map[string]map[string]any, error) {
	return r.byID(ctx, "get_jid", `SELECT id, full_ret FROM salt_returns WHERE jid = $1`, jid)
}

// GetFun is pgjsonb.get_fun: minion -> the full return of its last job of
// fun.
func (r *Returner) GetFun(ctx context.Context, fun string) (map[string]any, error) {
	m, err := r.byID(ctx, "get_fun", `SELECT s.id, s.full_ret FROM salt_returns s
JOIN (SELECT MAX(jid) AS jid, id FROM salt_returns WHERE fun = $1 GROUP BY id) last
ON s.jid = last.jid AND s.id = last.id WHERE s.fun = $1`, fun)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// GetJIDs is pgjsonb.get_jids.
func (r *Returner) GetJIDs(ctx context.Context) (map[string]map[string]any, error) {
	m, err := r.byID(ctx, "get_jids", `SELECT jid, load FROM jids WHERE $1::int = 0`, 0)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]any, len(m))
	for jid, load := range m {
		out[jid] = returners.FormatJIDInstance(jid, load)
	}
	return out, nil
}

// GetMinions is pgjsonb.get_minions.
func (r *Returner) GetMinions(ctx context.Context) ([]string, error) {
	if err := r.schema(ctx); err != nil {
		return nil, err
	}
	rows, err := r.pool.Query(ctx, `SELECT DISTINCT id FROM salt_returns ORDER BY id`)
	if err != nil {
		return nil, wrap("get_minions", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, wrap("get_minions", err)
}

// CleanOldJobs is pgjsonb.clean_old_jobs (without archiving): rows older
// than keep go.
func (r *Returner) CleanOldJobs(ctx context.Context, keep time.Duration) error {
	if keep <= 0 {
		return nil
	}
	if err := r.schema(ctx); err != nil {
		return err
	}
	cut := time.Now().Add(-keep)
	for _, q := range []string{
		`DELETE FROM jids WHERE jid IN (SELECT DISTINCT jid FROM salt_returns WHERE alter_time < $1)`,
		`DELETE FROM salt_returns WHERE alter_time < $1`,
		`DELETE FROM salt_events WHERE alter_time < $1`,
	} {
		if _, err := r.pool.Exec(ctx, q, cut); err != nil {
			return wrap("clean_old_jobs", err)
		}
	}
	return nil
}

// EventReturn is pgjsonb.event_return, with COPY for the batch.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	if err := r.schema(ctx); err != nil {
		return err
	}
	now := time.Now()
	rows := make([][]any, len(events))
	for i, ev := range events {
		b, err := returners.MarshalJSON(ev.Data)
		if err != nil {
			return err
		}
		rows[i] = []any{ev.Tag, string(b), r.masterID, now}
	}
	_, err := r.pool.CopyFrom(ctx, pgx.Identifier{"salt_events"}, []string{"tag", "data", "master_id", "alter_time"}, pgx.CopyFromRows(rows))
	return wrap("event_return", err)
}
