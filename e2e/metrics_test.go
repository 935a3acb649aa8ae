package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrapeMetrics gets http://addr/metrics and returns its samples by name
// and labels as the page writes them (name{l="v",...}); a histogram gives
// name_count and name_sum. The error says why there is no page.
func scrapeMetrics(addr string) (map[string]float64, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.Histogram.GetSampleCount())
				out[key+"_sum"] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out, nil
}

// TestMetricsEndpoint: a real master with metrics_port serves Prometheus'
// text format on 127.0.0.1; after a job, a reaction (a device's event
// driving a job back on it) and a relay's heartbeat, the counters moved,
// the latency histogram holds the returns, the relay's spool and the
// returner's queue are there.
func TestMetricsEndpoint(t *testing.T) {
	root := t.TempDir()
	sls := filepath.Join(root, "ping.sls")
	os.WriteFile(sls, []byte("ping_back:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n"), 0o644)
	port := freeTCPPort(t)
	c := newCluster(t, fmt.Sprintf("metrics_port: %d\n%sext_job_cache: rawfile_json\nrawfile_json.filename: %s\nreactor:\n  - 'myco/ping':\n    - %s\n",
		port, relayAllow, filepath.Join(root, "returns.json"), sls))
	c.startMaster()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c.startAgent("cam1", "")
	c.startAgent("r1", relayConf(freeUDPPort(t)))
	c.acceptAll("cam1", "r1")
	c.waitUp("cam1", "r1")

	before, err := scrapeMetrics(addr)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	if r := c.cli("halite", "cam1", "test.ping"); r.code != 0 {
		t.Fatalf("halite cam1 test.ping: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCmd(t, "halite-call", "-c", c.agentDir("cam1"), "event.send", "myco/ping", `{"why": "metrics"}`); r.code != 0 {
		t.Fatalf("event.send: exit %d %s", r.code, r.stderr)
	}
	var got map[string]float64
	waitFor(t, 30*time.Second, "the reaction's job returned, r1 linked and its heartbeat on the metrics page", func() bool {
		got, err = scrapeMetrics(addr)
		return err == nil && got["halite_master_reactor_reactions_total"] >= 1 && got["halite_master_relays_connected"] == 1 &&
			got["halite_master_returns_total"] >= before["halite_master_returns_total"]+2 &&
			got[`halite_relay_spool_items{relay="r1"}`] >= 0 && got[`halite_relay_heartbeat_timestamp_seconds{relay="r1"}`] > 0
	})
	grew := []string{
		"halite_master_jobs_published_total", "halite_master_returns_total", "halite_master_return_latency_seconds_count",
		"halite_master_events_published_total", "halite_master_reactor_events_total", "halite_master_reactor_matched_total",
		`halite_master_returner_delivered_total{returner="rawfile_json"}`,
	}
	for _, name := range grew {
		if got[name] < before[name]+1 {
			t.Errorf("%s: got %v, want at least %v", name, got[name], before[name]+1)
		}
	}
	// The job and the reaction's job: two returns timed from publication.
	if n := got["halite_master_return_latency_seconds_count"]; n < 2 {
		t.Errorf("latency histogram count: got %v, want at least 2 (the job and the reaction's job)", n)
	}
	if s := got["halite_master_return_latency_seconds_sum"]; s <= 0 || s > 60 {
		t.Errorf("latency histogram sum: got %v s, want above 0 and under a minute", s)
	}
	present := []string{
		`halite_master_agents_connected{via="direct"}`, "halite_master_relays_connected",
		`halite_relay_spool_bytes{relay="r1"}`, `halite_relay_devices{relay="r1"}`,
		`halite_master_returner_queue_depth{returner="rawfile_json"}`, `halite_master_returner_dead_letters{returner="rawfile_json"}`,
		"halite_master_events_dropped_total", "go_goroutines", "process_resident_memory_bytes", "process_open_fds",
	}
	for _, name := range present {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from the page", name)
		}
	}
	if n := got[`halite_master_agents_connected{via="direct"}`]; n != 2 {
		t.Errorf("agents connected directly: got %v, want 2 (cam1, r1)", n)
	}
	if n := got["halite_master_relays_connected"]; n != 1 {
		t.Errorf("relays connected: got %v, want 1", n)
	}
	// Only 127.0.0.1 by default: the master's one TCP listener is bound
	// to it, not to every address.
	if got, want := tcpListeners(t, c.master.cmd.Process.Pid), []string{fmt.Sprintf("0100007F:%04X", port)}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the master's TCP listeners (address:port in hex, as /proc/net/tcp): got %v, want %v", got, want)
	}
}

// TestMetricsOffByDefault: a master without metrics_port serves no page:
// nothing listens on a port it could have used.
func TestMetricsOffByDefault(t *testing.T) {
	c := newCluster(t, "")
	c.startMaster()
	if got := tcpListeners(t, c.master.cmd.Process.Pid); len(got) != 0 {
		t.Errorf("the master listens on TCP %v with metrics_port unset, want no TCP listener", got)
	}
}

// tcpListeners returns the local addresses (hex, as /proc/net/tcp and tcp6
// write them) of pid's listening TCP sockets, found by the inodes of its
// file descriptors. It fails the test if pid has no socket at all, since
// the answer would then prove nothing.
func tcpListeners(t *testing.T, pid int) []string {
	t.Helper()
	inodes := socketInodes(t, pid)
	if len(inodes) == 0 {
		t.Fatalf("found no socket of pid %d", pid)
	}
	var out []string
	for _, file := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			t.Fatalf("read /proc/%d/net/%s: %v", pid, file, err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st ... inode (field 9)
			f := strings.Fields(line)
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				out = append(out, f[1])
			}
		}
	}
	return out
}

// socketInodes returns the inodes of pid's sockets.
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			out[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	return out
}
