package retroute

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/testwait"
	"github.com/halite-fleet/halite/master/jobcache"
	"github.com/halite-fleet/halite/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// router is a Router on a real job cache and bus, running until the test
// ends.
type router struct {
	*Router
	cache *jobcache.Cache
	bus   *event.Bus
}

func startRouter(t *testing.T, setup func(*config.Master)) *router {
	t.Helper()
	dir := t.TempDir()
	cfg := config.DefaultMaster()
	cfg.CacheDir = filepath.Join(dir, "cache")
	setup(cfg)
	log := zaptest.NewLogger(t)
	cache, err := jobcache.Open(filepath.Join(dir, "jobs.db"), log)
	if err != nil {
		t.Fatal(err)
	}
	bus := event.NewBus(log)
	r, err := New(Options{Config: cfg, MasterID: "testmaster", Bus: bus, Cache: cache, Log: log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		bus.Close()
		cache.Close()
	})
	return &router{Router: r, cache: cache, bus: bus}
}

func lines(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func count(path string) int {
	b, _ := os.ReadFile(path)
	return strings.Count(string(b), "\n")
}

// TestReturned: where a return goes. A job's --return returners get it,
// opened with its --return_config when it has one (Salt's
// salt/returners/__init__.py _fetch_ret_config: the "alternative."
// prefix), the agent's return: option's returners get it plain, and a job
// the router did not see published is looked up in the job cache.
func TestReturned(t *testing.T) {
	dir := t.TempDir()
	plain, alt := filepath.Join(dir, "plain.json"), filepath.Join(dir, "alt.json")
	r := startRouter(t, func(c *config.Master) {
		c.Raw["rawfile_json.filename"] = plain
		c.Raw["alternative.rawfile_json.filename"] = alt
	})
	base := time.Date(2026, 11, 24, 4, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		name      string
		load      *jobcache.Load
		published bool // JobPublished (else only in the job cache)
		agentRets []string
		wantPlain int
		wantAlt   int
	}{
		{"--return", &jobcache.Load{Ret: "rawfile_json"}, true, nil, 1, 0},
		{"--return_config", &jobcache.Load{Ret: "rawfile_json", RetConfig: "alternative"}, true, nil, 0, 1},
		{"agent's return:", &jobcache.Load{}, true, []string{"rawfile_json"}, 1, 0},
		{"from the job cache", &jobcache.Load{Ret: "rawfile_json", RetConfig: "alternative"}, false, nil, 0, 1},
		{"nowhere", &jobcache.Load{}, true, nil, 0, 0},
	} {
		l := c.load
		l.JID, l.Fun, l.Tgt, l.StartTime = jobcache.JIDAt(base.Add(time.Duration(i)*time.Second)), "test.ping", "*", base
		if err := r.cache.SaveLoad(l); err != nil {
			t.Fatal(err)
		}
		if c.published {
			r.JobPublished(l)
		}
		before := map[string]int{plain: count(plain), alt: count(alt)}
		r.Returned(&protocol.ReturnBody{ID: "web1", JID: l.JID, Fun: "test.ping", Return: true, Success: true}, c.agentRets)
		// A marker return after it: once the marker is in, so is the
		// return, if it was routed to that file (one worker per returner,
		// in order).
		marker := jobcache.JIDAt(base.Add(time.Hour + time.Duration(i)*time.Second))
		r.Returned(&protocol.ReturnBody{ID: "marker", JID: marker, Fun: "test.ping"}, []string{"rawfile_json"})
		testwait.For(t, 20*time.Second, c.name+": the marker in "+plain, func() bool {
			l := lines(plain) // read once: the file may grow between two reads
			return strings.Contains(l[len(l)-1], marker)
		})
		if c.wantAlt > 0 {
			testwait.For(t, 20*time.Second, c.name+": a line in "+alt, func() bool { return count(alt) == before[alt]+c.wantAlt })
		}
		if got := count(plain) - before[plain] - 1; got != c.wantPlain {
			t.Errorf("%s: %d new lines in %s besides the marker, want %d", c.name, got, plain, c.wantPlain)
		}
		if got := count(alt) - before[alt]; got != c.wantAlt {
			t.Errorf("%s: %d new lines in %s, want %d", c.name, got, alt, c.wantAlt)
		}
	}
}

// TestEventReturn: event_return gets the bus's events after
// event_return_whitelist and event_return_blacklist (Salt's
// salt/utils/event.py EventReturn._filter).
func TestEventReturn(t *testing.T) {
	file := filepath.Join(t.TempDir(), "events.json")
	r := startRouter(t, func(c *config.Master) {
		c.Raw["rawfile_json.filename"] = file
		c.EventReturn = []string{"rawfile_json"}
		c.EventReturnWhitelist = []string{"keep/*"}
		c.EventReturnBlacklist = []string{"keep/not"}
	})
	for _, tag := range []string{"drop/1", "keep/not", "keep/1"} {
		r.bus.Publish(tag, map[string]any{"n": 1})
	}
	testwait.For(t, 20*time.Second, "keep/1 in "+file, func() bool { return strings.Contains(string(must(os.ReadFile(file))), "keep/1") })
	if got := lines(file); len(got) != 1 {
		t.Errorf("event_return wrote %q, want only keep/1", got)
	}
}

func must(b []byte, _ error) []byte { return b }

// TestNewRefuses: a returner that does not exist, or cannot serve its
// option's role, is an error naming the option.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(*config.Master)
		want  string
	}{
		{"ext_job_cache", func(c *config.Master) { c.ExtJobCache = []string{"nosuch"} }, "ext_job_cache"},
		{"event_return", func(c *config.Master) { c.EventReturn = []string{"nosuch"} }, "event_return"},
		{"master_job_cache", func(c *config.Master) { c.MasterJobCache = "rawfile_json" }, "master_job_cache"},
	} {
		cfg := config.DefaultMaster()
		cfg.CacheDir = t.TempDir()
		c.setup(cfg)
		_, err := New(Options{Config: cfg, MasterID: "m", Bus: event.NewBus(zaptest.NewLogger(t)), Log: zaptest.NewLogger(t)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v, want an error naming %s", c.name, err, c.want)
		}
	}
}

func TestCheckReturn(t *testing.T) {
	if err := CheckReturn("rawfile_json, syslog"); err != nil {
		t.Errorf("CheckReturn(rawfile_json, syslog): %v", err)
	}
	if err := CheckReturn("rawfile_json,nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("CheckReturn(rawfile_json,nosuch): %v, want an error naming nosuch", err)
	}
}
