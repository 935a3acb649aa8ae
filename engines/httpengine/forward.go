package httpengine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/targets"
)

// The http_forward engine: events whose tag matches one of tags are POSTed
// to url as a JSON array of {"tag", "data"}, in batches of at most
// batch_size, sent when full or flush_interval seconds after the first
// event waiting. A failed POST (a network error or a status other than
// 2xx) is retried with backoff (1 s doubling to 30 s), events keep
// queueing meanwhile up to queue_size, past which the oldest are dropped,
// counted and logged.
//
//	engines:
//	  - http_forward:
//	      url: https://collector.example.com/halite
//	      tags: ['salt/beacon/*', 'salt/job/*/ret/*']
//	      batch_size: 100
//	      flush_interval: 1
//	      headers: {Authorization: 'Bearer s3cret'}
func init() {
	engines.Register("http_forward", func(o *engines.Opts) (engines.Engine, error) {
		f := &forwarder{}
		u, err := o.Required("url")
		if err != nil {
			return nil, err
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("option url: expected an http:// or https:// URL, got %q", u)
		}
		f.url = u
		if f.tags, err = o.Strings("tags", []string{"*"}); err != nil {
			return nil, err
		}
		if f.batch, err = o.Int("batch_size", 100, 1, 100000); err != nil {
			return nil, err
		}
		if f.flush, err = o.Seconds("flush_interval", time.Second); err != nil {
			return nil, err
		}
		if f.timeout, err = o.Seconds("timeout", 10*time.Second); err != nil {
			return nil, err
		}
		if f.queue, err = o.Int("queue_size", 10000, 1, 10000000); err != nil {
			return nil, err
		}
		h, err := o.Map("headers")
		if err != nil {
			return nil, err
		}
		f.headers = map[string]string{}
		for k, v := range h {
			f.headers[k] = fmt.Sprint(v)
		}
		return f, nil
	})
}

type forwarder struct {
	url     string
	tags    []string
	batch   int
	flush   time.Duration
	timeout time.Duration
	queue   int
	headers map[string]string
}

type item struct {
	Tag  string         `json:"tag"`
	Data map[string]any `json:"data"`
}

func match(globs []string, tag string) bool {
	for _, g := range globs {
		if g == "*" || g == tag || targets.MatchGlob(g, tag) {
			return true
		}
	}
	return false
}

func (f *forwarder) Run(ctx context.Context, env *engines.Env) error {
	sub := env.Bus.Subscribe("*", 65536)
	defer sub.Close()
	client := &http.Client{Timeout: f.timeout}
	var pending []item
	var dropped uint64
	var flushAt <-chan time.Time
	var timer *time.Timer
	backoff := time.Duration(0)
	var retryAt <-chan time.Time
	send := func() {
		n := min(len(pending), f.batch)
		if err := f.post(ctx, client, pending[:n]); err != nil {
			if ctx.Err() != nil {
				return
			}
			if backoff == 0 {
				backoff = time.Second
			} else if backoff *= 2; backoff > 30*time.Second {
				backoff = 30 * time.Second
			}
			env.Log.Warn("http_forward: POST failed; will retry", zap.Error(err), zap.Int("waiting", len(pending)), zap.Duration("in", backoff))
			retryAt = time.After(backoff)
			return
		}
		backoff = 0
		pending = append(pending[:0], pending[n:]...)
	}
	for {
		if retryAt == nil && len(pending) >= f.batch {
			send()
			continue
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case ev, ok := <-sub.C():
			if !ok {
				return nil
			}
			if !match(f.tags, ev.Tag) {
				continue
			}
			if len(pending) >= f.queue {
				pending = pending[1:]
				dropped++
				if dropped == 1 || dropped%1000 == 0 {
					env.Log.Warn("http_forward: queue full, oldest events dropped", zap.Uint64("dropped_total", dropped))
				}
			}
			pending = append(pending, item{ev.Tag, ev.Data})
			if flushAt == nil {
				timer = time.NewTimer(f.flush)
				flushAt = timer.C
			}
		case <-flushAt:
			flushAt = nil
			if retryAt == nil && len(pending) > 0 {
				send()
			}
			if len(pending) > 0 {
				timer = time.NewTimer(f.flush)
				flushAt = timer.C
			}
		case <-retryAt:
			retryAt = nil
			if len(pending) > 0 {
				send()
			}
		}
	}
}

func (f *forwarder) post(ctx context.Context, c *http.Client, items []item) error {
	b, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("encode events: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range f.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", f.url, resp.Status)
	}
	return nil
}
