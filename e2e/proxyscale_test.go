package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// TestProxyScale (HALITE_PROXY_SCALE=1000 to run it): one relay process
// with that many http proxy minions against one REST device of the test,
// beside a relay with none; `halite 'gw-*' test.ping` is run seven times
// and the median reported, with both relays' resident memory (VmRSS) once
// the proxy minions are up and idle, and after the pings. Figures for
// docs/BENCHMARKS.md. It fails if the idle proxy minions, before any
// job, cost more than 10 MiB of resident memory (10 KiB each past 1,000),
// or a goroutine each.
func TestProxyScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HALITE_PROXY_SCALE"))
	if n <= 0 {
		t.Skip("HALITE_PROXY_SCALE=<proxy minions> runs it")
	}
	dev := proxytest.NewRESTDevice("u", "p", nil)
	defer dev.Close()
	c := newCluster(t, relayAllow+"auto_accept: True\n")
	c.startMaster()
	var b strings.Builder
	fmt.Fprintf(&b, "relay:\n  interface: 127.0.0.1\n  port: %d\n  proxy:\n", freeUDPPort(t))
	for i := range n {
		fmt.Fprintf(&b, "    - {id: gw-%04d, proxytype: http, url: '%s', health_path: /health}\n", i, dev.URL)
	}
	// gctrace: the Go runtime prints each collection's live heap.
	c.writeAgentConfig("r1", b.String())
	c.agents["r1"] = c.startRawEnv([]string{"GODEBUG=gctrace=1,scavtrace=1"}, filepath.Join(binDir, "halite-agent"), "-c", c.agentDir("r1"), "-l", "warn")
	c.writeAgentConfig("r2", fmt.Sprintf("relay:\n  interface: 127.0.0.1\n  port: %d\n", freeUDPPort(t)))
	c.agents["r2"] = c.startRawEnv([]string{"GODEBUG=gctrace=1"}, filepath.Join(binDir, "halite-agent"), "-c", c.agentDir("r2"), "-l", "warn")
	up := time.Now()
	waitFor(t, 5*time.Minute, fmt.Sprintf("%d proxy minions up", n), func() bool {
		r := c.cli("halite-run", "manage.up", "--out", "json")
		var up []string
		return json.Unmarshal([]byte(r.stdout), &up) == nil && len(up) >= n+2
	})
	t.Logf("%d proxy minions up %s after the relay started", n, time.Since(up).Round(time.Millisecond))
	time.Sleep(3 * time.Second) // a measurement pause: the last sessions' handshakes settle
	r1, r2 := rss(t, c.agents["r1"]), rss(t, c.agents["r2"])
	t.Logf("VmRSS before any job: relay with %d proxy minions %d KiB, relay without %d KiB: %d KiB more (%.1f KiB each)",
		n, r1, r2, r1-r2, float64(r1-r2)/float64(n))
	t.Logf("of which: relay with %s; without %s", memStatus(t, c.agents["r1"]), memStatus(t, c.agents["r2"]))
	// Issue 19: 1,000 idle proxy minions cost at most 10 MiB (and 10 KiB
	// each past that).
	if limit := max(10<<10, 10*n); r1-r2 > limit {
		t.Errorf("%d idle proxy minions cost %d KiB of resident memory, more than %d KiB", n, r1-r2, limit)
	}
	t.Logf("the relay's last collections before any job:\n%s", lastGCs(c.agents["r1"].output(), 2))
	t.Logf("the relay without proxy minions, its last collections:\n%s", lastGCs(c.agents["r2"].output(), 2))

	var lat []time.Duration
	for i := range 7 {
		start := time.Now()
		m, r := c.jsonOut("halite", "-t", "60", "gw-*", "test.ping")
		el := time.Since(start)
		ok := 0
		for _, v := range m {
			if v == true {
				ok++
			}
		}
		if ok != n {
			t.Fatalf("round %d: %d of %d returned True\n%s", i, ok, n, r.stderr)
		}
		lat = append(lat, el)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("halite 'gw-*' test.ping, %d proxy minions: p50 %s (min %s, max %s; the CLI's own start included)",
		n, lat[len(lat)/2].Round(time.Millisecond), lat[0].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))

	// Idle: the HTTP connections of the pings close (5 s), then the
	// relays' memory.
	time.Sleep(6 * time.Second) // a measurement pause, not a wait for a condition: idle_conn_timeout is 5 s
	r1, r2 = rss(t, c.agents["r1"]), rss(t, c.agents["r2"])
	t.Logf("VmRSS after the pings: relay with %d proxy minions %d KiB, relay without %d KiB: %d KiB for the proxy minions (%.1f KiB each)",
		n, r1, r2, r1-r2, float64(r1-r2)/float64(n))
	t.Logf("the relay's last collections (gctrace: heap before -> after -> live MB):\n%s", lastGCs(c.agents["r1"].output(), 4))
	g1, g2 := goroutines(t, c.agents["r1"]), goroutines(t, c.agents["r2"])
	t.Logf("goroutines, idle: relay with %d proxy minions %d, relay without %d", n, g1, g2)
	if g1 > g2+50 {
		t.Errorf("%d proxy minions cost %d goroutines idle", n, g1-g2)
	}
	delete(c.agents, "r1")
	delete(c.agents, "r2")
}

// lastGCs returns the last n gctrace lines of out.
func lastGCs(out string, n int) string {
	var gcs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "gc ") {
			gcs = append(gcs, l)
		}
	}
	return strings.Join(gcs[max(0, len(gcs)-n):], "\n")
}

// goroutines makes p dump its goroutines (SIGQUIT: the Go runtime prints
// them and exits) and counts them.
func goroutines(t *testing.T, p *proc) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no goroutine dump")
	}
	return strings.Count(p.output(), "\ngoroutine ")
}

// memStatus returns p's resident memory by kind: anonymous (heap,
// stacks), file (its binary's pages), from /proc/<pid>/status.
func memStatus(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && (f[0] == "RssAnon:" || f[0] == "RssFile:") {
			out = append(out, f[0]+" "+f[1]+" KiB")
		}
	}
	return strings.Join(out, ", ")
}

// rss is a process's VmRSS in KiB.
func rss(t *testing.T, p *proc) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
