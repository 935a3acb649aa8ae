package master

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/master/api"
)

// scrape gets the metrics page of m's handler and parses it.
func scrape(t *testing.T, m *Master) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(m.metricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse the metrics page: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			key := name
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case mt.Counter != nil:
				out[key] = mt.Counter.GetValue()
			case mt.Gauge != nil:
				out[key] = mt.Gauge.GetValue()
			case mt.Histogram != nil:
				out[key+"_count"] = float64(mt.Histogram.GetSampleCount())
				out[key+"_sum"] = mt.Histogram.GetSampleSum()
			}
		}
	}
	return out
}

// TestMetricsJobAndReturn: a job to a real agent moves the published and
// returned counters and puts its return in the latency histogram; the
// page also has the agents, the event bus and Go's runtime.
func TestMetricsJobAndReturn(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) { c.AutoAccept = true }, nil)
	tm.startAgent(t, "a1", nil)
	tm.waitConnected(t, "a1")
	before := scrape(t, tm.Master)
	if got := before["halite_master_return_latency_seconds_count"]; got != 0 {
		t.Errorf("latency count before any job: got %v, want 0", got)
	}
	tm.publish(t, &api.Request{Tgt: "a1", Fun: "test.ping"})
	got := scrape(t, tm.Master)
	checks := []struct {
		name string
		want float64
	}{
		{"halite_master_jobs_published_total", before["halite_master_jobs_published_total"] + 1},
		{"halite_master_returns_total", before["halite_master_returns_total"] + 1},
		{"halite_master_return_latency_seconds_count", 1},
		{"halite_master_agents_connected{via=direct}", 1},
		{"halite_master_agents_connected{via=relay}", 0},
		{"halite_master_relays_connected", 0},
		{"halite_master_info{id=testmaster}{version=" + Version + "}", 1},
	}
	for _, c := range checks {
		if g, ok := got[c.name]; !ok || g != c.want {
			t.Errorf("%s: got %v (present %v), want %v", c.name, g, ok, c.want)
		}
	}
	if s := got["halite_master_return_latency_seconds_sum"]; s <= 0 || s > waitTimeout.Seconds() {
		t.Errorf("latency sum: got %v s, want above 0 and under %v", s, waitTimeout)
	}
	if got["halite_master_events_published_total"] <= before["halite_master_events_published_total"] {
		t.Errorf("events published: got %v, want more than %v", got["halite_master_events_published_total"], before["halite_master_events_published_total"])
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "halite_master_event_subscribers", "halite_master_returns_held_bytes"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from the page", name)
		}
	}
}

// TestMetricsRelayHeartbeat: only a relay's own heartbeat, from an agent
// relay_allow names, sets its spool gauges; a device naming another relay,
// an agent not allowed as a relay, and fields that are not non-negative
// numbers are left out.
func TestMetricsRelayHeartbeat(t *testing.T) {
	tm := startMaster(t, func(c *config.Master) {
		c.AutoAccept = true
		c.RelayAllow = []string{"r1"}
	}, nil)
	r1 := tm.startAgent(t, "r1", nil)
	d1 := tm.startAgent(t, "d1", nil)
	tm.waitConnected(t, "r1", "d1")
	send := func(a *testAgent, tag string, data map[string]any) {
		t.Helper()
		if err := a.SendEvent(tag, data); err != nil {
			t.Fatalf("%s sends %s: %v", a.id, tag, err)
		}
		tm.events.wait(t, tag, func(d map[string]any) bool {
			inner, _ := d["data"].(map[string]any)
			return d["id"] == a.id && fmt.Sprint(inner["n"]) == fmt.Sprint(data["n"])
		})
	}
	// Spoofed and unallowed first: nothing is kept.
	send(d1, "halite/relay/r1/heartbeat", map[string]any{"n": 1, "spool_bytes": 666, "spool_items": 666})
	send(d1, "halite/relay/d1/heartbeat", map[string]any{"n": 2, "spool_bytes": 777, "spool_items": 777})
	if n := testutil.CollectAndCount(masterCollector{tm.Master}, "halite_relay_spool_bytes", "halite_relay_heartbeat_timestamp_seconds"); n != 0 {
		t.Errorf("relay metrics after spoofed heartbeats: got %d series, want 0", n)
	}
	send(r1, "halite/relay/r1/heartbeat", map[string]any{"n": 3, "spool_bytes": 4096, "spool_items": 7, "devices": 2, "spool_dropped": 1})
	want := `
# HELP halite_relay_spool_bytes Bytes of returns and events a relay holds for the master, as its last heartbeat said.
# TYPE halite_relay_spool_bytes gauge
halite_relay_spool_bytes{relay="r1"} 4096
# HELP halite_relay_spool_items Returns and events a relay holds for the master, as its last heartbeat said.
# TYPE halite_relay_spool_items gauge
halite_relay_spool_items{relay="r1"} 7
# HELP halite_relay_devices Devices a relay has connected and accepted, as its last heartbeat said.
# TYPE halite_relay_devices gauge
halite_relay_devices{relay="r1"} 2
# HELP halite_relay_spool_dropped_total Items a relay dropped from its spool since it started, as its last heartbeat said.
# TYPE halite_relay_spool_dropped_total counter
halite_relay_spool_dropped_total{relay="r1"} 1
`
	names := []string{"halite_relay_spool_bytes", "halite_relay_spool_items", "halite_relay_devices", "halite_relay_spool_dropped_total"}
	if err := testutil.CollectAndCompare(masterCollector{tm.Master}, strings.NewReader(want), names...); err != nil {
		t.Errorf("after r1's heartbeat: %v", err)
	}
	// Hostile values: negative, text, NaN, a list. The fields are left
	// out; the heartbeat's time is still kept.
	send(r1, "halite/relay/r1/heartbeat", map[string]any{"n": 4, "spool_bytes": -5, "spool_items": "many", "devices": math.NaN(), "spool_dropped": []any{1}})
	if n := testutil.CollectAndCount(masterCollector{tm.Master}, names...); n != 0 {
		t.Errorf("after a heartbeat of bad values: got %d series, want 0", n)
	}
	if n := testutil.CollectAndCount(masterCollector{tm.Master}, "halite_relay_heartbeat_timestamp_seconds"); n != 1 {
		t.Errorf("heartbeat timestamps: got %d series, want 1", n)
	}
}

// TestPubTimesBound: the publish times kept for the latency histogram are
// bounded in number and age.
func TestPubTimesBound(t *testing.T) {
	p := pubTimes{at: map[string]time.Time{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range trackedJobs + 10 {
		p.add(jidN(i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	if got := len(p.at); got != trackedJobs {
		t.Errorf("after %d jobs: got %d kept, want %d", trackedJobs+10, got, trackedJobs)
	}
	if _, ok := p.get(jidN(9)); ok {
		t.Errorf("job 9 still kept, want dropped (oldest)")
	}
	if _, ok := p.get(jidN(trackedJobs + 9)); !ok {
		t.Errorf("newest job not kept")
	}
	p.add("late", t0.Add(trackedAge+time.Hour))
	if got := len(p.at); got != 1 {
		t.Errorf("after a job a day later: got %d kept, want 1", got)
	}
	if got := len(p.order) - p.head; got != 1 {
		t.Errorf("order: got %d live entries, want 1", got)
	}
}

func jidN(i int) string { return "j" + strconv.Itoa(i) }
