package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// httpDevice is proxytype http: a REST device under one base URL, with
// HTTP basic authentication when a username is set.
type httpDevice struct {
	m      *Minion
	base   *url.URL
	health string
}

func newHTTPDevice(m *Minion) (*httpDevice, error) {
	e := &m.o.Entry
	u, err := url.Parse(e.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("url %q: not an http:// or https:// URL", e.URL)
	}
	h := e.HealthPath
	if h == "" {
		h = "/"
	}
	return &httpDevice{m: m, base: u, health: h}, nil
}

func (d *httpDevice) functions() []string { return []string{"http.query"} }

// resolve returns the URL of ref (a path, or a URL on the device) under
// the base URL. A URL elsewhere is refused: the device's credentials go to
// the device only.
func (d *httpDevice) resolve(ref string) (*url.URL, error) {
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", ref, err)
	}
	u := d.base.ResolveReference(r)
	if r.IsAbs() || r.Host != "" {
		if u.Scheme != d.base.Scheme || u.Host != d.base.Host {
			return nil, fmt.Errorf("url %s is not on this device (%s://%s): a proxy minion queries its own device only", ref, d.base.Scheme, d.base.Host)
		}
	} else if !strings.HasPrefix(r.Path, "/") {
		// A relative path is under the base URL's path.
		u = d.base.JoinPath(r.Path)
		u.RawQuery = r.RawQuery
	}
	return u, nil
}

// do sends one request to the device.
func (d *httpDevice) do(ctx context.Context, method, ref string, body io.Reader, header map[string]string) (*http.Response, []byte, error) {
	u, err := d.resolve(ref)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if e := &d.m.o.Entry; e.Username != "" {
		pw, err := d.m.password()
		if err != nil {
			return nil, nil, err
		}
		req.SetBasicAuth(e.Username, pw)
	}
	resp, err := d.m.o.HTTP.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("http %s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	var l limited
	if _, err := io.Copy(&l, resp.Body); err != nil {
		return nil, nil, fmt.Errorf("http %s %s: read: %w", method, u.Redacted(), err)
	}
	if l.dropped > 0 {
		return resp, []byte(l.String()), nil
	}
	return resp, l.b, nil
}

func (d *httpDevice) ping(ctx context.Context) bool {
	resp, _, err := d.do(ctx, http.MethodGet, d.health, nil, nil)
	return err == nil && resp.StatusCode/100 == 2
}

// grains: an http device is not asked; its host grain is its base URL's
// (baseGrains), not a map of its own that the relay would keep.
func (d *httpDevice) grains(context.Context) (map[string]any, error) {
	return nil, nil
}

// call runs http.query: Salt's salt/modules/http.py query(url, **kwargs)
// (salt.utils.http.query) with the device's base URL and credentials:
// url is a path under it; method (GET), data (the body), header_dict;
// the return is {body, status} (and headers with headers=True). A status
// of 400 or more is an error, as Salt's query says in "error".
func (d *httpDevice) call(ctx context.Context, fun string, a *args) (any, int, bool, error) {
	if fun != "http.query" {
		return nil, 0, false, nil
	}
	ref, err := a.str(0, "url", false)
	if err != nil {
		return nil, 0, true, err
	}
	if ref == "" {
		ref = d.base.Path
	}
	method, err := a.str(-1, "method", false)
	if err != nil {
		return nil, 0, true, err
	}
	if method == "" {
		method = http.MethodGet
	}
	method = strings.ToUpper(method)
	data, err := a.str(-1, "data", false)
	if err != nil {
		return nil, 0, true, err
	}
	header := map[string]string{}
	if hv, ok := a.get(-1, "header_dict"); ok {
		hm, isMap := hv.(map[string]any)
		if !isMap {
			return nil, 0, true, errors.New("http.query: header_dict must be a mapping")
		}
		for k, v := range hm {
			header[k] = fmt.Sprint(v)
		}
	}
	var body io.Reader
	if data != "" {
		body = strings.NewReader(data)
	}
	resp, b, err := d.do(ctx, method, ref, body, header)
	if err != nil {
		return nil, 0, true, err
	}
	out := map[string]any{"body": string(b), "status": resp.StatusCode}
	if hv, _ := a.get(-1, "headers"); hv == true {
		h := map[string]any{}
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h[k] = resp.Header.Get(k)
		}
		out["headers"] = h
	}
	if resp.StatusCode >= 400 {
		out["error"] = resp.Status
		return out, RetcodeGeneric, true, nil
	}
	return out, 0, true, nil
}
