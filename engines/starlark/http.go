package starlark

import (
	gojson "encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.starlark.net/starlark"
)

// maxHTTPBody bounds a response body a script may read.
const maxHTTPBody = 4 << 20

var httpClient = &http.Client{}

func (rt *runtime) httpDo(method string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(_ *starlark.Thread, fn *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var rawURL string
		var body, jsonBody starlark.Value = starlark.None, starlark.None
		headers := new(starlark.Dict)
		var timeout starlark.Value = starlark.MakeInt(10)
		check := true
		var err error
		if method == "GET" {
			err = starlark.UnpackArgs(fn.Name(), args, kwargs, "url", &rawURL, "headers?", &headers, "timeout?", &timeout, "check?", &check)
		} else {
			err = starlark.UnpackArgs(fn.Name(), args, kwargs, "url", &rawURL, "body?", &body, "json?", &jsonBody, "headers?", &headers, "timeout?", &timeout, "check?", &check)
		}
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(rawURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s: only http:// and https:// URLs, got %q", fn.Name(), rawURL)
		}
		secs, ok := starlark.AsFloat(timeout)
		if !ok || secs <= 0 {
			return nil, fmt.Errorf("%s: timeout must be a positive number of seconds", fn.Name())
		}
		var rd io.Reader
		ctype := ""
		switch {
		case jsonBody != starlark.None:
			v, err := FromValue(jsonBody)
			if err != nil {
				return nil, fmt.Errorf("%s: json: %w", fn.Name(), err)
			}
			b, err := gojson.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: json: %w", fn.Name(), err)
			}
			rd, ctype = strings.NewReader(string(b)), "application/json"
		case body != starlark.None:
			s, ok := starlark.AsString(body)
			if !ok {
				if b, ok := body.(starlark.Bytes); ok {
					s = string(b)
				} else {
					return nil, fmt.Errorf("%s: body must be a string", fn.Name())
				}
			}
			rd = strings.NewReader(s)
		}
		req, err := http.NewRequestWithContext(rt.ctx, method, u.String(), rd)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fn.Name(), err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for _, it := range headers.Items() {
			k, _ := starlark.AsString(it[0])
			v, _ := starlark.AsString(it[1])
			req.Header.Set(k, v)
		}
		c := *httpClient
		c.Timeout = time.Duration(secs * float64(time.Second))
		resp, err := c.Do(req)
		if err != nil {
			if rt.ctx.Err() != nil {
				return nil, errStopping
			}
			if !check {
				d := starlark.NewDict(3)
				d.SetKey(starlark.String("status"), starlark.MakeInt(0))
				d.SetKey(starlark.String("body"), starlark.String(""))
				d.SetKey(starlark.String("error"), starlark.String(err.Error()))
				return d, nil
			}
			return nil, fmt.Errorf("%s %s: %w", fn.Name(), rawURL, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPBody))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", fn.Name(), rawURL, err)
		}
		d := starlark.NewDict(2)
		d.SetKey(starlark.String("status"), starlark.MakeInt(resp.StatusCode))
		d.SetKey(starlark.String("body"), starlark.String(b))
		return d, nil
	}
}
