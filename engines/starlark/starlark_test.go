package starlark

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/halite-fleet/halite/engines"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
)

// harness runs engines from files in a directory, as the master does.
type harness struct {
	t    *testing.T
	dir  string
	bus  *event.Bus
	m    *engines.Manager
	logs *observer.ObservedLogs
	sent []event.Event // FireMaster
	mu   sync.Mutex
}

func newHarness(t *testing.T, files map[string]string) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), bus: event.NewBus(nil)}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *harness) start(conf []any, env engines.Env) {
	h.t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	h.logs = logs
	env.Bus = h.bus
	if env.Role == "" {
		env.Role, env.ID = "master", "m1"
	}
	env.FireMaster = func(tag string, data map[string]any) error {
		h.mu.Lock()
		h.sent = append(h.sent, event.Event{Tag: tag, Data: data})
		h.mu.Unlock()
		return nil
	}
	m, err := engines.New(engines.Options{Config: conf, Env: env, Lookup: engines.UserDir{Dirs: []string{h.dir}, Script: Compile}.Lookup,
		Log: zap.New(core), MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	if err != nil {
		h.t.Fatal(err)
	}
	h.m = m
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		<-done
		h.bus.Close()
		if h.t.Failed() {
			for _, e := range h.logs.All() {
				h.t.Logf("log: %s %s %v", e.Level, e.Message, e.ContextMap())
			}
		}
	})
}

func (h *harness) sentEvents() []event.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]event.Event(nil), h.sent...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 30*time.Second, what, cond)
}

func TestCountingEngine(t *testing.T) {
	h := newHarness(t, map[string]string{"counter.star": `
EVENTS = ["test/*"]
counts = {"n": 0}
def on_event(tag, data):
    counts["n"] += data["inc"]
    if counts["n"] == 6:
        event.fire("counter/done", {"n": counts["n"], "who": opts["who"], "grain": grains.get("site:name", "none")})
`})
	sub := h.bus.Subscribe("counter/done", 1)
	h.start([]any{map[string]any{"counter": map[string]any{"who": "me"}}}, engines.Env{
		Grains: func() map[string]any { return map[string]any{"site": map[string]any{"name": "north"}} }})
	waitFor(t, "the engine to listen", func() bool { return h.bus.Stats().Subscribers >= 2 })
	for i := 1; i <= 3; i++ {
		h.bus.Publish("test/x", map[string]any{"inc": i})
		h.bus.Publish("other/x", map[string]any{"inc": 100})
	}
	select {
	case ev := <-sub.C():
		if ev.Data["n"] != int64(6) || ev.Data["who"] != "me" || ev.Data["grain"] != "north" {
			t.Errorf("counter/done data = %v", ev.Data)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the counter never reached 6")
	}
}

func TestSandbox(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"load", `load("os.star", "x")` + "\ndef start():\n    pass\n", "load"},
		{"file url", "def start():\n    http.get('file:///etc/passwd')\n", "only http:// and https://"},
		{"call on master", "def start():\n    call('cmd.run', 'id')\n", "not available on the master"},
		{"nothing", "x = 1\n", "defines none of on_event, on_tick or start"},
		{"runtime error", "def start():\n    x = {}['nope']\n", "key \"nope\" not in dict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, map[string]string{"e.star": tt.src})
			h.start([]any{"e"}, engines.Env{})
			waitFor(t, "the engine to fail and be restarted", func() bool {
				st := h.m.Status()[0]
				return st.Restarts > 0 || (st.LastError != "" && strings.Contains(st.LastError, tt.want))
			})
			if st := h.m.Status()[0]; !strings.Contains(st.LastError, tt.want) {
				t.Errorf("last error = %q, want it to contain %q", st.LastError, tt.want)
			}
		})
	}
}

func TestNoFilesNoProcesses(t *testing.T) {
	// Names a script could reach the system with do not exist: refused
	// when the file is compiled, that is when the daemon starts.
	for _, src := range []string{"def start():\n    open('/etc/passwd')\n", "def start():\n    exec('ls')\n",
		"def start():\n    os.system('ls')\n", "def start():\n    __import__('os')\n"} {
		if _, err := Compile("e.star", []byte(src)); err == nil || !strings.Contains(err.Error(), "undefined") {
			t.Errorf("Compile(%q) error = %v, want undefined", src, err)
		}
	}
}

func TestSyntaxErrorNamesFile(t *testing.T) {
	if _, err := Compile("/srv/halite/_engines/bad.star", []byte("def on_event(:\n")); err == nil || !strings.Contains(err.Error(), "bad.star:1") {
		t.Errorf("Compile error = %v, want the file and line", err)
	}
}

func TestStartLoopAndCall(t *testing.T) {
	h := newHarness(t, map[string]string{"loop.star": `
EVENTS = ["ask"]
def start():
    while True:
        ev = event.get(timeout = 0.05)
        if ev == None:
            continue
        r = call("test.echo", ev["data"]["text"], upper = True)
        event.send("answer", {"r": r})
`})
	h.start([]any{"loop"}, engines.Env{Role: "agent", ID: "cam1", Call: func(_ context.Context, fun string, args []any, kw map[string]any) (any, error) {
		if fun != "test.echo" || kw["upper"] != true {
			return nil, io.EOF
		}
		return strings.ToUpper(args[0].(string)), nil
	}})
	waitFor(t, "the engine to listen", func() bool { return h.bus.Stats().Subscribers >= 1 })
	h.bus.Publish("ask", map[string]any{"text": "hi"})
	waitFor(t, "the answer", func() bool { return len(h.sentEvents()) == 1 })
	if ev := h.sentEvents()[0]; ev.Tag != "answer" || ev.Data["r"] != "HI" {
		t.Errorf("answer = %v", ev)
	}
}

func example(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "engines", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recorder is an HTTP endpoint that keeps the JSON bodies it is sent.
type recorder struct {
	mu     sync.Mutex
	bodies []map[string]any
	hdrs   []http.Header
	status int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status != 0 {
		w.WriteHeader(r.status)
		return
	}
	r.bodies = append(r.bodies, m)
	r.hdrs = append(r.hdrs, req.Header.Clone())
}

func (r *recorder) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

func TestExampleBeaconMetrics(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	h := newHarness(t, map[string]string{"beacon_metrics.star": example(t, "beacon_metrics.star")})
	h.start([]any{map[string]any{"beacon_metrics": map[string]any{"url": srv.URL + "/api/v1/series", "api_key": "k1", "flush": 0.05}}}, engines.Env{})
	waitFor(t, "the engine to listen", func() bool { return h.bus.Stats().Subscribers >= 1 })
	h.bus.Publish("salt/beacon/cam1/memusage/", map[string]any{"memusage": 81.5, "id": "cam1"})
	h.bus.Publish("salt/beacon/cam2/diskusage/", map[string]any{"diskusage": int64(91), "mount": "/", "id": "cam2"})
	var all []any
	waitFor(t, "two series posted", func() bool {
		all = nil
		for _, b := range rec.got() {
			s, _ := b["series"].([]any)
			all = append(all, s...)
		}
		return len(all) >= 2
	})
	metrics := map[string]any{}
	for _, s := range all {
		m := s.(map[string]any)
		metrics[m["metric"].(string)+" "+m["tags"].([]any)[0].(string)] = m["points"].([]any)[0].([]any)[1]
	}
	if metrics["halite.beacon.memusage.memusage minion:cam1"] != 81.5 || metrics["halite.beacon.diskusage.diskusage minion:cam2"] != 91.0 {
		t.Errorf("series = %v", metrics)
	}
	if rec.hdrs[0].Get("DD-API-KEY") != "k1" {
		t.Errorf("DD-API-KEY header = %q", rec.hdrs[0].Get("DD-API-KEY"))
	}
}

func TestExampleSitePoller(t *testing.T) {
	var mu sync.Mutex
	up := true
	cam := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			w.WriteHeader(503)
		}
	}))
	defer cam.Close()
	h := newHarness(t, map[string]string{"site_poller.star": example(t, "site_poller.star")})
	h.start([]any{map[string]any{"site_poller": map[string]any{"interval": 0.05, "devices": map[string]any{
		"cam-door": cam.URL + "/status",
		"cam-gone": "http://127.0.0.1:1/status", // nothing listens: down, not a crash
	}}}}, engines.Env{Role: "agent", ID: "relay1", Grains: func() map[string]any { return map[string]any{"site": "north"} }})
	status := func(name string) []map[string]any {
		var out []map[string]any
		for _, ev := range h.sentEvents() {
			if ev.Tag == "site/device/"+name+"/status" {
				out = append(out, ev.Data)
			}
		}
		return out
	}
	waitFor(t, "first states", func() bool { return len(status("cam-door")) == 1 && len(status("cam-gone")) == 1 })
	if d := status("cam-door")[0]; d["up"] != true || d["site"] != "north" || d["status"] != int64(200) {
		t.Errorf("cam-door = %v", d)
	}
	if d := status("cam-gone")[0]; d["up"] != false || d["status"] != int64(0) {
		t.Errorf("cam-gone = %v", d)
	}
	mu.Lock()
	up = false
	mu.Unlock()
	waitFor(t, "cam-door down", func() bool { return len(status("cam-door")) == 2 })
	if d := status("cam-door")[1]; d["up"] != false || d["status"] != int64(503) {
		t.Errorf("cam-door after failure = %v", d)
	}
	if n := len(status("cam-gone")); n != 1 {
		t.Errorf("cam-gone fired %d times while unchanged, want 1", n)
	}
	if st := h.m.Status()[0]; st.Restarts != 0 {
		t.Errorf("the poller restarted %d times (%s)", st.Restarts, st.LastError)
	}
}

func TestExampleEventExport(t *testing.T) {
	rec := &recorder{status: 503}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	h := newHarness(t, map[string]string{"event_export.star": example(t, "event_export.star")})
	h.start([]any{map[string]any{"event_export": map[string]any{"url": srv.URL, "topic": "audit", "batch": 2}}}, engines.Env{})
	waitFor(t, "the engine to listen", func() bool { return h.bus.Stats().Subscribers >= 1 })
	for i := 0; i < 5; i++ {
		h.bus.Publish("salt/job/"+string(rune('a'+i))+"/new", map[string]any{"i": i})
	}
	// The endpoint fails at first: nothing is lost, it is sent once it works.
	rec.mu.Lock()
	rec.status = 0
	rec.mu.Unlock()
	var tags []string
	waitFor(t, "five events exported", func() bool {
		tags = nil
		for _, b := range rec.got() {
			if b["topic"] != "audit" {
				continue
			}
			for _, m := range b["messages"].([]any) {
				tags = append(tags, m.(map[string]any)["tag"].(string))
			}
		}
		return len(tags) >= 5
	})
	want := "salt/job/a/new salt/job/b/new salt/job/c/new salt/job/d/new salt/job/e/new"
	if got := strings.Join(tags, " "); got != want {
		t.Errorf("exported %s, want %s in order", got, want)
	}
}

// TestREADMEEngine: the engine of the README's walkthrough compiles and
// reacts to a service beacon event as the README says.
func TestREADMEEngine(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```python\n# /home/you/halite/srv/_engines/door_watch.star\n")
	src, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no door_watch.star block")
	}
	h := newHarness(t, map[string]string{"door_watch.star": src})
	h.start([]any{"door_watch"}, engines.Env{})
	waitFor(t, "the engine to listen", func() bool { return h.bus.Stats().Subscribers >= 1 })
	h.bus.Publish("salt/beacon/cam1/service/camd", map[string]any{"camd": map[string]any{"running": false}, "service_name": "camd", "id": "cam1"})
	waitFor(t, "myco/service/down", func() bool { return len(h.sentEvents()) == 1 })
	if ev := h.sentEvents()[0]; ev.Tag != "myco/service/down" || ev.Data["minion"] != "cam1" || ev.Data["service"] != "camd" {
		t.Errorf("event = %v", ev)
	}
}
