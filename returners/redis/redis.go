// Package redis is the redis returner: Salt's redis_return key layout, so
// tools that read Salt's data keep working, plus event_return into a Redis
// stream. It registers itself as "redis".
//
//	ret:<jid>       hash  minion id -> return dict (JSON), expires after keep_jobs
//	load:<jid>      string the job's load (JSON), expires after keep_jobs
//	<minion>:<fun>  string the jid of the minion's last job of fun
//	minions         set   every minion id that returned
//	salt_events     stream events: tag, data (JSON), master_id (Halite's)
//
// Options: redis.host (salt), redis.port (6379), redis.db (0),
// redis.password, redis.unix_socket_path, and Halite's redis.key_prefix
// (put before every key) and redis.event_maxlen (the stream's approximate
// bound, 1000000).
package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("redis", returners.Caps{JobCache: true, Event: true}, New)
}

// Returner is the redis returner.
type Returner struct {
	c        *goredis.Client
	prefix   string
	ttl      time.Duration
	maxlen   int64
	masterID string
}

// New connects to the server the options name.
func New(ctx context.Context, cfg returners.Config) (returners.Returner, error) {
	o := cfg.Options("redis")
	port, err := o.Int("port", 6379)
	if err != nil {
		return nil, err
	}
	db, err := o.Int("db", 0)
	if err != nil {
		return nil, err
	}
	maxlen, err := o.Int("event_maxlen", 1000000)
	if err != nil {
		return nil, err
	}
	opt := &goredis.Options{
		Addr:     net.JoinHostPort(o.String("host", "salt"), strconv.Itoa(port)),
		DB:       db,
		Password: o.String("password", ""),
		// Fail fast: the queue in front retries with backoff.
		DialTimeout: 5 * time.Second, MaxRetries: -1,
	}
	if p := o.String("unix_socket_path", ""); p != "" {
		opt.Network, opt.Addr = "unix", p
	}
	ttl := cfg.KeepJobs
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	return &Returner{c: goredis.NewClient(opt), prefix: o.String("key_prefix", ""), ttl: ttl,
		maxlen: int64(maxlen), masterID: cfg.MasterID}, nil
}

// Close closes the client.
func (r *Returner) Close() error { return r.c.Close() }

func (r *Returner) k(s string) string { return r.prefix + s }

// Returner is redis_return.returner.
func (r *Returner) Returner(ctx context.Context, ret map[string]any) error {
	b, err := returners.MarshalJSON(ret)
	if err != nil {
		return err
	}
	id, jid := returners.Str(ret, "id"), returners.Str(ret, "jid")
	p := r.c.Pipeline()
	p.HSet(ctx, r.k("ret:"+jid), id, b)
	p.Expire(ctx, r.k("ret:"+jid), r.ttl)
	p.Set(ctx, r.k(id+":"+returners.Str(ret, "fun")), jid, 0)
	p.SAdd(ctx, r.k("minions"), id)
	_, err = p.Exec(ctx)
	return wrap("returner", err)
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	// A command the server refuses for what it holds (too large, wrong
	// type) will be refused again.
	var re goredis.Error
	if errors.As(err, &re) && !strings.HasPrefix(re.Error(), "LOADING") && !strings.HasPrefix(re.Error(), "BUSY") &&
		!strings.HasPrefix(re.Error(), "MASTERDOWN") && !strings.HasPrefix(re.Error(), "READONLY") &&
		!strings.HasPrefix(re.Error(), "OOM") && !strings.HasPrefix(re.Error(), "NOAUTH") {
		return returners.Permanent(fmt.Errorf("redis %s: %w", op, err))
	}
	return fmt.Errorf("redis %s: %w", op, err)
}

// PrepJID returns passed, or a new jid.
func (r *Returner) PrepJID(_ context.Context, _ bool, passed string) (string, error) {
	return returners.PrepJID(passed), nil
}

// SaveLoad is redis_return.save_load.
func (r *Returner) SaveLoad(ctx context.Context, jid string, load map[string]any, _ []string) error {
	b, err := returners.MarshalJSON(load)
	if err != nil {
		return err
	}
	return wrap("save_load", r.c.Set(ctx, r.k("load:"+jid), b, r.ttl).Err())
}

// SaveMinions does nothing, as in Salt's redis_return.
func (r *Returner) SaveMinions(context.Context, string, []string) error { return nil }

// GetLoad is redis_return.get_load.
func (r *Returner) GetLoad(ctx context.Context, jid string) (map[string]any, error) {
	s, err := r.c.Get(ctx, r.k("load:"+jid)).Result()
	if errors.Is(err, goredis.Nil) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, wrap("get_load", err)
	}
	return decode(s)
}

func decode(s string) (map[string]any, error) {
	out := map[string]any{}
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return returners.Numbers(out), nil
}

// GetJID is redis_return.get_jid.
func (r *Returner) GetJID(ctx context.Context, jid string) (map[string]map[string]any, error) {
	all, err := r.c.HGetAll(ctx, r.k("ret:"+jid)).Result()
	if err != nil {
		return nil, wrap("get_jid", err)
	}
	out := make(map[string]map[string]any, len(all))
	for id, s := range all {
		if out[id], err = decode(s); err != nil {
			return nil, fmt.Errorf("get_jid %s/%s: %w", jid, id, err)
		}
	}
	return out, nil
}

// GetFun is redis_return.get_fun: minion -> jid.
func (r *Returner) GetFun(ctx context.Context, fun string) (map[string]any, error) {
	ids, err := r.c.SMembers(ctx, r.k("minions")).Result()
	if err != nil {
		return nil, wrap("get_fun", err)
	}
	out := map[string]any{}
	for _, id := range ids {
		jid, err := r.c.Get(ctx, r.k(id+":"+fun)).Result()
		if err == nil && jid != "" {
			out[id] = jid
		}
	}
	return out, nil
}

// GetJIDs is redis_return.get_jids.
func (r *Returner) GetJIDs(ctx context.Context) (map[string]map[string]any, error) {
	keys, err := r.scan(ctx, r.k("load:*"))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		vals, err := r.c.MGet(ctx, keys[:n]...).Result()
		if err != nil {
			return nil, wrap("get_jids", err)
		}
		keys = keys[n:]
		for _, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			load, err := decode(s)
			if err != nil {
				continue
			}
			jid := returners.Str(load, "jid")
			out[jid] = returners.FormatJIDInstance(jid, load)
		}
	}
	return out, nil
}

func (r *Returner) scan(ctx context.Context, match string) ([]string, error) {
	var keys []string
	it := r.c.Scan(ctx, 0, match, 1000).Iterator()
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		return nil, wrap("scan", err)
	}
	return keys, nil
}

// GetMinions is redis_return.get_minions.
func (r *Returner) GetMinions(ctx context.Context) ([]string, error) {
	ids, err := r.c.SMembers(ctx, r.k("minions")).Result()
	return ids, wrap("get_minions", err)
}

// CleanOldJobs is redis_return.clean_old_jobs: loads expire by TTL; the
// returns of a job whose load is gone are deleted.
func (r *Returner) CleanOldJobs(ctx context.Context, _ time.Duration) error {
	rets, err := r.scan(ctx, r.k("ret:*"))
	if err != nil {
		return err
	}
	loads, err := r.scan(ctx, r.k("load:*"))
	if err != nil {
		return err
	}
	living := make(map[string]bool, len(loads))
	for _, k := range loads {
		living[k] = true
	}
	var dead []string
	for _, k := range rets {
		if !living[r.k("load:"+strings.TrimPrefix(k, r.k("ret:")))] {
			dead = append(dead, k)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	return wrap("clean_old_jobs", r.c.Del(ctx, dead...).Err())
}

// EventReturn appends the events to the salt_events stream in one round
// trip.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	p := r.c.Pipeline()
	for _, ev := range events {
		b, err := returners.MarshalJSON(ev.Data)
		if err != nil {
			return err
		}
		p.XAdd(ctx, &goredis.XAddArgs{
			Stream: r.k("salt_events"), MaxLen: r.maxlen, Approx: true,
			Values: []any{"tag", ev.Tag, "data", b, "master_id", r.masterID},
		})
	}
	_, err := p.Exec(ctx)
	return wrap("event_return", err)
}
