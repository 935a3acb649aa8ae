package relay

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/relay/proxy/proxytest"
)

// TestProxyHeap (HALITE_PROXY_HEAP=<n> to run it): the heap a relay's n
// idle proxy minions hold, in the test's process (the master's side
// included; HALITE_PROXY_HEAP_PROFILE=<file> writes the heap profile, to
// read with go tool pprof -sample_index=inuse_space -focus 'relay\.').
// e2e.TestProxyScale measures the relay's process as a whole.
func TestProxyHeap(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("HALITE_PROXY_HEAP"))
	if n <= 0 {
		t.Skip("HALITE_PROXY_HEAP=<proxy minions> runs it")
	}
	if os.Getenv("HALITE_PROXY_HEAP_PROFILE") != "" {
		old := runtime.MemProfileRate
		runtime.MemProfileRate = 1 // every allocation: a profile of bytes, not samples
		t.Cleanup(func() { runtime.MemProfileRate = old })
	}
	tm := startMaster(t, true)
	dev := proxytest.NewRESTDevice("u", "p", nil)
	t.Cleanup(dev.Close)
	e := make([]config.Proxy, n)
	for i := range e {
		e[i] = config.Proxy{ID: fmt.Sprintf("gw-%04d", i), ProxyType: "http", URL: dev.URL, HealthPath: "/health", Timeout: 10}
	}
	tr := startRelay(t, tm, "r1", func(r *config.Relay) { r.Proxies = e }, nil)
	waitFor(t, "the proxy minions up", func() bool { _, up := tr.proxyStats(); return up == n })
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("%d proxy minions up: heap in use %d KiB (master and relay), %d goroutines", n, ms.HeapInuse>>10, runtime.NumGoroutine())
	// What the idle relay allocates: the sweeps of the proxy minions'
	// streams (the master's side idles beside it).
	before := ms.TotalAlloc
	time.Sleep(5 * proxySweep) // a measurement over five sweeps, not a wait for a condition
	runtime.ReadMemStats(&ms)
	t.Logf("idle for %s: %d KiB allocated (master and relay)", 5*proxySweep, (ms.TotalAlloc-before)>>10)
	if f := os.Getenv("HALITE_PROXY_HEAP_PROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if err := pprof.Lookup("heap").WriteTo(out, 0); err != nil {
			t.Fatal(err)
		}
	}
}
