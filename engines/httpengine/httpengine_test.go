package httpengine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func run(t *testing.T, bus *event.Bus, conf []any, figures func() map[string]float64) *engines.Manager {
	t.Helper()
	m, err := engines.New(engines.Options{Config: conf, Env: engines.Env{Role: "master", ID: "m1", Bus: bus, Figures: figures},
		Log: zaptest.NewLogger(t), MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, what, cond)
}

func TestWebhook(t *testing.T) {
	bus := event.NewBus(nil)
	defer bus.Close()
	sub := bus.Subscribe("salt/engines/hook/*", 10)
	port := freePort(t)
	run(t, bus, []any{map[string]any{"webhook": map[string]any{"address": "127.0.0.1", "port": port, "auth_token": "s3cret"}}}, nil)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	post := func(path, ctype, body, token string) int {
		req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		if token != "" {
			req.Header.Set("X-Auth-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, "the webhook to listen", func() bool { return post("/", "text/plain", "", "") == 401 })
	if code := post("/deploy/web", "application/json", `{"app": "web", "rev": 7}`, "s3cret"); code != 200 {
		t.Fatalf("POST: status %d, want 200", code)
	}
	if code := post("/form", "application/x-www-form-urlencoded", "a=1&b=2&b=3", "s3cret"); code != 200 {
		t.Fatalf("POST form: status %d", code)
	}
	if code := post("/x", "text/plain", strings.Repeat("x", 2<<20), "s3cret"); code != 413 {
		t.Errorf("POST of 2 MiB: status %d, want 413", code)
	}
	resp, err := http.Get(url + "/deploy")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("GET: status %d, want 405", resp.StatusCode)
		}
	}
	ev := <-sub.C()
	if ev.Tag != "salt/engines/hook/deploy/web" {
		t.Errorf("tag = %s", ev.Tag)
	}
	post1 := ev.Data["post"].(map[string]any)
	if post1["app"] != "web" || post1["rev"] != 7.0 || ev.Data["body"] != `{"app": "web", "rev": 7}` {
		t.Errorf("data = %v", ev.Data)
	}
	if _, leaked := ev.Data["headers"].(map[string]any)["X-Auth-Token"]; leaked {
		t.Error("the auth token is in the event's headers")
	}
	ev = <-sub.C()
	if p := ev.Data["post"].(map[string]any); ev.Tag != "salt/engines/hook/form" || p["a"] != "1" || len(p["b"].([]any)) != 2 {
		t.Errorf("form event = %s %v", ev.Tag, ev.Data)
	}
}

func TestWebhookBadOptions(t *testing.T) {
	for _, tt := range []struct {
		opts map[string]any
		want string
	}{
		{map[string]any{}, "engine hook: option port is required"},
		{map[string]any{"port": 70000}, "engine hook: option port: 70000 is out of range"},
		{map[string]any{"port": 8080, "ssl_crt": "/x"}, "engine hook: option ssl_crt and ssl_key go together"},
		{map[string]any{"port": 8080, "prot": 1}, "engine hook: unknown option prot"},
	} {
		tt.opts["engine_module"] = "webhook"
		_, err := engines.New(engines.Options{Config: []any{map[string]any{"hook": tt.opts}}})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%v) = %v, want %q", tt.opts, err, tt.want)
		}
	}
	for _, tt := range []struct {
		mod  string
		opts map[string]any
		want string
	}{
		{"http_forward", map[string]any{}, "option url is required"},
		{"http_forward", map[string]any{"url": "ftp://x"}, "option url: expected an http"},
		{"http_forward", map[string]any{"url": "http://x", "batch_size": 0}, "option batch_size: 0 is out of range"},
		{"metrics", map[string]any{}, "option port or statsd is required"},
		{"metrics", map[string]any{"statsd": "nohost"}, "option statsd: expected host:port"},
	} {
		_, err := engines.New(engines.Options{Config: []any{map[string]any{tt.mod: tt.opts}}})
		if err == nil || !strings.Contains(err.Error(), "engine "+tt.mod+": "+tt.want) {
			t.Errorf("New(%s %v) = %v, want %q", tt.mod, tt.opts, err, tt.want)
		}
	}
}

// collector is an HTTP endpoint recording the batches it is POSTed.
type collector struct {
	mu      sync.Mutex
	batches [][]item
	fail    int // answer 500 to this many requests first
	auth    []string
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail > 0 {
		c.fail--
		w.WriteHeader(500)
		return
	}
	var b []item
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		w.WriteHeader(400)
		return
	}
	c.batches = append(c.batches, b)
	c.auth = append(c.auth, r.Header.Get("Authorization"))
}

func (c *collector) tags() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, b := range c.batches {
		for _, it := range b {
			out = append(out, it.Tag)
		}
	}
	return out
}

func TestHTTPForward(t *testing.T) {
	col := &collector{fail: 2}
	srv := httptest.NewServer(col)
	defer srv.Close()
	bus := event.NewBus(nil)
	defer bus.Close()
	run(t, bus, []any{map[string]any{"http_forward": map[string]any{"url": srv.URL, "tags": []any{"salt/beacon/*"},
		"batch_size": 3, "flush_interval": 0.05, "headers": map[string]any{"Authorization": "Bearer t"}}}}, nil)
	waitFor(t, "the engine to listen", func() bool { return bus.Stats().Subscribers >= 1 })
	for i := 0; i < 7; i++ {
		bus.Publish(fmt.Sprintf("salt/beacon/cam%d/load/", i), map[string]any{"1m": i})
		bus.Publish("salt/job/x/new", nil)
	}
	waitFor(t, "seven events forwarded", func() bool { return len(col.tags()) >= 7 })
	got := strings.Join(col.tags(), " ")
	want := "salt/beacon/cam0/load/ salt/beacon/cam1/load/ salt/beacon/cam2/load/ salt/beacon/cam3/load/ salt/beacon/cam4/load/ salt/beacon/cam5/load/ salt/beacon/cam6/load/"
	if got != want {
		t.Errorf("forwarded %s\nwant %s (in order, after two failures)", got, want)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	for i, b := range col.batches {
		if len(b) > 3 {
			t.Errorf("batch %d has %d events, want at most batch_size 3", i, len(b))
		}
		if col.auth[i] != "Bearer t" {
			t.Errorf("batch %d Authorization = %q", i, col.auth[i])
		}
	}
}

func TestMetrics(t *testing.T) {
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	bus := event.NewBus(nil)
	defer bus.Close()
	port := freePort(t)
	run(t, bus, []any{map[string]any{"metrics": map[string]any{"port": port, "statsd": udp.LocalAddr().String(), "datadog": true, "interval": 0.05}}},
		func() map[string]float64 { return map[string]float64{`halite_engine_restarts_total{engine="x"}`: 2} })
	waitFor(t, "the engine to listen", func() bool { return bus.Stats().Subscribers >= 1 })
	bus.Publish("salt/beacon/cam1/memusage/", map[string]any{"memusage": 81.5, "id": "cam1"})
	bus.Publish("salt/beacon/cam1/diskusage/", map[string]any{"diskusage": 40.0, "mount": "/", "id": "cam1"})
	bus.Publish("salt/beacon/cam2/load/", map[string]any{"1m": 0.5, "5m": 0.25, "15m": 0.125})
	bus.Publish("salt/beacon/cam2/service/nginx", map[string]any{"nginx": map[string]any{"running": true}, "service_name": "nginx"})
	var body string
	waitFor(t, "the Prometheus endpoint", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, "halite_beacon_service_nginx_running")
	})
	for _, want := range []string{
		"# TYPE halite_beacon_memusage_memusage gauge\n",
		`halite_beacon_memusage_memusage{minion="cam1"} 81.5`,
		`halite_beacon_diskusage_diskusage{minion="cam1"} 40`,
		`halite_beacon_load_1m{minion="cam2"} 0.5`,
		`halite_beacon_service_nginx_running{minion="cam2",sub="nginx"} 1`,
		"halite_bus_published_total ",
		`halite_engine_restarts_total{engine="x"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "mount") {
		t.Errorf("a string field became a metric:\n%s", body)
	}
	buf := make([]byte, 2048)
	udp.SetReadDeadline(time.Now().Add(30 * time.Second))
	var lines string
	for !strings.Contains(lines, "halite.beacon.memusage.memusage:81.5|g|#minion:cam1") {
		n, _, err := udp.ReadFrom(buf)
		if err != nil {
			t.Fatalf("no StatsD packet with the memusage gauge: %v; got %q", err, lines)
		}
		lines += string(buf[:n]) + "\n"
	}
}
