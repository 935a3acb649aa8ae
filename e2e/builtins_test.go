package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	natsgo "github.com/nats-io/nats.go"
)

// TestBuiltinBeaconsAndEngines runs every built-in beacon on a real agent
// and the built-in master engines on a real master: the beacon events
// reach http_forward (a real HTTP server here), event_forward (the real
// NATS and Mosquitto servers), metrics (its Prometheus endpoint and a
// StatsD listener), and stalekey deletes the key of an agent that went
// away.
func TestBuiltinBeaconsAndEngines(t *testing.T) {
	root := t.TempDir()
	watched := filepath.Join(root, "watched")
	os.MkdirAll(watched, 0o755)
	logFile := filepath.Join(root, "app.log")
	os.WriteFile(logFile, nil, 0o644)

	// Where the master's engines send things.
	var mu sync.Mutex
	forwarded := map[string]bool{} // beacon names seen by http_forward
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var items []struct {
			Tag  string         `json:"tag"`
			Data map[string]any `json:"data"`
		}
		json.NewDecoder(r.Body).Decode(&items)
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			if p := strings.Split(it.Tag, "/"); len(p) >= 4 && p[2] == "cam1" {
				forwarded[p[3]] = true
			}
		}
	}))
	defer collector.Close()
	statsd, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer statsd.Close()
	nc, err := natsgo.Connect("nats://127.0.0.1:4222", natsgo.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS at 127.0.0.1:4222 does not answer (run tools/ci/services.sh): %v", err)
	}
	defer nc.Close()
	prefix := fmt.Sprintf("e2e%d", time.Now().UnixNano()%1e9)
	natsSub, err := nc.SubscribeSync(prefix + ".salt.beacon.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	mqttGot := make(chan string, 100)
	mc := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://127.0.0.1:1883").SetClientID(prefix))
	if tok := mc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("Mosquitto at 127.0.0.1:1883 does not answer (run tools/ci/services.sh): %v", tok.Error())
	}
	defer mc.Disconnect(100)
	mc.Subscribe(prefix+"/salt/beacon/#", 0, func(_ paho.Client, m paho.Message) {
		select {
		case mqttGot <- m.Topic():
		default:
		}
	}).WaitTimeout(10 * time.Second)

	metricsPort := freeTCPPort(t)
	c := newCluster(t, fmt.Sprintf(`engines:
  - http_forward:
      url: %s
      tags: ['salt/beacon/*']
      flush_interval: 0.2
  - to_nats:
      engine_module: event_forward
      nats: nats://127.0.0.1:4222
      prefix: %s
      tags: ['salt/beacon/*']
  - to_mqtt:
      engine_module: event_forward
      mqtt: tcp://127.0.0.1:1883
      prefix: %s
      tags: ['salt/beacon/*']
  - metrics:
      port: %d
      statsd: %s
      datadog: True
      interval: 0.5
  - stalekey:
      interval: 1
      expire: 0.003
`, collector.URL, prefix, prefix, metricsPort, statsd.LocalAddr()))
	c.startMaster()
	c.startAgent("cam1", fmt.Sprintf(`beacons:
  memusage: [{percent: 0%%}, {interval: 1}]
  diskusage: [{/: 0%%}, {interval: 1}]
  load: [{interval: 1}]
  swapusage: [{percent: 0%%}, {interval: 1}]
  status: [{interval: 1}]
  ps: [{processes: {halite-agent: running}}, {interval: 1}]
  service: [{services: {halite-agent: {}}}, {interval: 1}]
  network_info: [{interfaces: {lo: {}}}, {interval: 1}]
  inotify: [{files: {%s: {mask: [create]}}}, {interval: 1}]
  log: [{file: %s}, {tags: {hit: {regex: hello}}}, {interval: 1}]
`, watched, logFile))
	c.startAgent("gone", "")
	c.acceptAll("cam1", "gone")
	c.stop(c.agents["gone"])

	// Beacons whose events need something to happen.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			os.WriteFile(filepath.Join(watched, fmt.Sprint(i)), nil, 0o644)
			f, _ := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("hello\n")
			f.Close()
		}
	}()
	want := []string{"memusage", "diskusage", "load", "status", "ps", "service", "network_info", "inotify", "log"}
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "SwapTotal:" && f[1] != "0" {
			want = append(want, "swapusage") // a machine without swap has no swap usage to report
		}
	}
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, b := range want {
			if !forwarded[b] {
				out = append(out, b)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no event at the http_forward endpoint from the beacons %v", missing())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if msg, err := natsSub.NextMsg(30 * time.Second); err != nil || !strings.HasPrefix(msg.Subject, prefix+".salt.beacon.cam1.") {
		t.Errorf("NATS: %v %v", msg, err)
	}
	select {
	case topic := <-mqttGot:
		if !strings.HasPrefix(topic, prefix+"/salt/beacon/cam1/") {
			t.Errorf("MQTT topic %s", topic)
		}
	case <-time.After(30 * time.Second):
		t.Error("no beacon event on MQTT")
	}
	var body string
	waitFor(t, 30*time.Second, "beacon gauges on the metrics endpoint", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, `halite_beacon_memusage_memusage{minion="cam1"}`) && strings.Contains(body, `halite_beacon_load_1m{minion="cam1"}`)
	})
	if !strings.Contains(body, "halite_minions_connected ") || !strings.Contains(body, "halite_bus_published_total ") {
		t.Errorf("metrics lack the master's figures:\n%s", body)
	}
	buf := make([]byte, 2048)
	statsd.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, _, err := statsd.ReadFrom(buf); err != nil || !strings.Contains(string(buf[:n]), "|g") {
		t.Errorf("StatsD: %q %v", buf[:n], err)
	}
	// stalekey: "gone" has not been seen for longer than expire (10.8 s).
	waitFor(t, 60*time.Second, "stalekey to delete the key of gone", func() bool {
		keys, _ := c.jsonOut("halite-key", "-L")
		for _, id := range keys["minions"].([]any) {
			if id == "gone" {
				return false
			}
		}
		return true
	})
	keys, _ := c.jsonOut("halite-key", "-L")
	if !strings.Contains(jsonString(keys["minions"]), "cam1") {
		t.Errorf("stalekey deleted cam1, which is connected: %v", keys)
	}
}
