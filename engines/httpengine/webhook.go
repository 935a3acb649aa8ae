package httpengine

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
)

// maxBody bounds a webhook request body.
const maxBody = 1 << 20

// The webhook engine (Salt's webhook engine): an HTTP server whose POSTs
// become events (on an agent, sent to the master) tagged salt/engines/hook/<path>, with data {headers, body,
// post}: body the raw body, post the body decoded (a JSON object, or a
// form). Options: port (required), address (default 0.0.0.0), ssl_crt and
// ssl_key (serve HTTPS), auth_token (then a request must carry it in
// X-Auth-Token or as a Bearer token, else 401). Answers 200 {"success":
// true} once the event is fired; 405 for other methods, 413 past 1 MiB.
//
//	engines:
//	  - webhook:
//	      port: 8080
//	      auth_token: s3cret
func init() {
	engines.Register("webhook", func(o *engines.Opts) (engines.Engine, error) {
		w := &webhook{}
		var err error
		if w.port, err = o.Int("port", -1, 0, 65535); err != nil {
			return nil, err
		}
		if w.port < 0 {
			return nil, fmt.Errorf("option port is required")
		}
		if w.addr, err = o.String("address", "0.0.0.0"); err != nil {
			return nil, err
		}
		if w.crt, err = o.String("ssl_crt", ""); err != nil {
			return nil, err
		}
		if w.key, err = o.String("ssl_key", ""); err != nil {
			return nil, err
		}
		if (w.crt == "") != (w.key == "") {
			return nil, fmt.Errorf("option ssl_crt and ssl_key go together")
		}
		if w.crt != "" {
			if _, err := tls.LoadX509KeyPair(w.crt, w.key); err != nil {
				return nil, fmt.Errorf("option ssl_crt: %w", err)
			}
		}
		if w.token, err = o.String("auth_token", ""); err != nil {
			return nil, err
		}
		return w, nil
	})
}

type webhook struct {
	addr     string
	port     int
	crt, key string
	token    string
}

func (w *webhook) Run(ctx context.Context, env *engines.Env) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(w.addr, strconv.Itoa(w.port)))
	if err != nil {
		return fmt.Errorf("webhook listen: %w", err)
	}
	srv := &http.Server{
		Handler:           w.handler(env),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		ErrorLog:          zap.NewStdLog(env.Log),
	}
	env.Log.Info("webhook listening", zap.Stringer("addr", ln.Addr()))
	done := make(chan error, 1)
	go func() {
		if w.crt != "" {
			done <- srv.ServeTLS(ln, w.crt, w.key)
		} else {
			done <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return fmt.Errorf("webhook serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (w *webhook) handler(env *engines.Env) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			rw.Header().Set("Allow", "POST")
			http.Error(rw, "only POST", http.StatusMethodNotAllowed)
			return
		}
		if w.token != "" {
			got := r.Header.Get("X-Auth-Token")
			if got == "" {
				got = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(w.token)) != 1 {
				http.Error(rw, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBody))
		if err != nil {
			http.Error(rw, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		path := strings.Trim(r.URL.Path, "/")
		tag := "salt/engines/hook"
		if path != "" {
			tag += "/" + path
		}
		headers := map[string]any{}
		for k, v := range r.Header {
			if k == "X-Auth-Token" || k == "Authorization" {
				continue
			}
			headers[k] = strings.Join(v, ", ")
		}
		data := map[string]any{"headers": headers, "body": string(body)}
		if post := decodeBody(r.Header.Get("Content-Type"), body); post != nil {
			data["post"] = post
		}
		// As Salt's: on an agent the event goes to the master (and the
		// agent's own bus); on the master, to its bus.
		if err := env.FireMaster(tag, data); err != nil {
			env.Log.Warn("webhook event not sent", zap.String("tag", tag), zap.Error(err))
			http.Error(rw, "event not queued: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"success": true}` + "\n"))
	})
}

// decodeBody decodes a JSON object or a form; nil for anything else.
func decodeBody(ctype string, body []byte) map[string]any {
	switch {
	case strings.HasPrefix(ctype, "application/x-www-form-urlencoded"):
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil
		}
		out := map[string]any{}
		for k, v := range vals {
			if len(v) == 1 {
				out[k] = v[0]
			} else {
				l := make([]any, len(v))
				for i, s := range v {
					l[i] = s
				}
				out[k] = l
			}
		}
		return out
	default:
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			return m
		}
	}
	return nil
}
