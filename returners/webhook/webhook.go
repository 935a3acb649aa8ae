// Package webhook is the webhook returner: each return (and each batch of
// events) is POSTed as JSON to a URL. It registers itself as "webhook".
// Failed posts are retried by the returner queue with backoff; a 4xx
// answer other than 408 and 429 sets the row aside.
//
// Options: webhook.url (required), webhook.headers (a mapping),
// webhook.timeout (seconds, 10), webhook.verify_ssl (True).
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("webhook", returners.Caps{Event: true}, New)
}

// Returner posts to one URL.
type Returner struct {
	url     string
	headers map[string]string
	c       *http.Client
}

// New reads the options.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	o := cfg.Options("webhook")
	u := o.String("url", "")
	if u == "" {
		return nil, fmt.Errorf("webhook.url is not set")
	}
	timeout, err := o.Seconds("timeout", 10*time.Second)
	if err != nil {
		return nil, err
	}
	verify, err := o.Bool("verify_ssl", true)
	if err != nil {
		return nil, err
	}
	h := map[string]string{}
	if v, ok := o.Get("headers"); ok {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("webhook.headers must be a mapping, got %T", v)
		}
		for k, v := range m {
			h[k] = fmt.Sprint(v)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if !verify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	return &Returner{url: u, headers: h, c: &http.Client{Timeout: timeout, Transport: tr}}, nil
}

// Close closes idle connections.
func (r *Returner) Close() error {
	r.c.CloseIdleConnections()
	return nil
}

func (r *Returner) post(ctx context.Context, v any) error {
	b, err := returners.MarshalJSON(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(b))
	if err != nil {
		return returners.Permanent(fmt.Errorf("webhook: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook post: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != 408 && resp.StatusCode != 429:
		return returners.Permanent(fmt.Errorf("webhook post: %s", resp.Status))
	}
	return fmt.Errorf("webhook post: %s", resp.Status)
}

// Returner posts the return dict.
func (r *Returner) Returner(ctx context.Context, ret map[string]any) error { return r.post(ctx, ret) }

// EventReturn posts {"events": [...]}.
func (r *Returner) EventReturn(ctx context.Context, events []returners.Event) error {
	return r.post(ctx, map[string]any{"events": events})
}
