package webhook

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/halite-fleet/halite/returners"
	"github.com/halite-fleet/halite/returners/rettest"
)

func TestPost(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Token") != "s3cret" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		bodies = append(bodies, m)
		w.WriteHeader(status)
	}))
	defer srv.Close()
	r, err := returners.Open(rettest.Ctx(t), "webhook", returners.RoleEvent, returners.Config{Opts: map[string]any{
		"webhook.url": srv.URL, "webhook.headers": map[string]any{"X-Token": "s3cret"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := rettest.Ctx(t)
	if err := r.Returner(ctx, rettest.Ret("20260101000000000000", "web1", "test.ping", true)); err != nil {
		t.Fatal(err)
	}
	rettest.Events(t, r.(returners.EventReturner), 3, 3)
	for _, c := range []struct {
		status    int
		permanent bool
	}{{http.StatusServiceUnavailable, false}, {http.StatusTooManyRequests, false}, {http.StatusRequestEntityTooLarge, true}} {
		mu.Lock()
		status = c.status
		mu.Unlock()
		err := r.Returner(ctx, rettest.Ret("20260101000000000000", "web2", "test.ping", true))
		if err == nil || returners.IsPermanent(err) != c.permanent {
			t.Errorf("answer %d: got %v, want an error, permanent %v", c.status, err, c.permanent)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if bodies[0]["id"] != "web1" || len(bodies[1]["events"].([]any)) != 3 {
		t.Fatalf("bodies = %v, want the return of web1, then 3 events", bodies[:2])
	}
	if _, err := returners.Open(ctx, "webhook", returners.RoleReturn, returners.Config{}); err == nil {
		t.Fatal("webhook without webhook.url: got no error")
	}
}
