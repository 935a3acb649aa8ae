package httpengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/engines"
)

// maxSeries bounds the beacon series the metrics engine keeps.
const maxSeries = 20000

// The metrics engine: the numbers in beacon events (salt/beacon/<id>/
// <beacon>/[sub]) become gauges named halite_beacon_<beacon>_<key>
// (nested keys joined by _) labelled minion and, when the tag has one,
// sub; with the daemon's own figures (bus published, dropped and
// subscribers, beacon checks and engine restarts) they are served in the
// Prometheus text format on http://address:port/metrics and/or pushed
// every interval seconds to a StatsD server (statsd: host:port), with
// Datadog's tags when datadog: True (DogStatsD, the Datadog agent's port
// 8125).
//
//	engines:
//	  - metrics:
//	      port: 9273              # Prometheus endpoint; address defaults to 127.0.0.1
//	      statsd: 127.0.0.1:8125  # push, optional
//	      datadog: True
//	      interval: 10
func init() {
	engines.Register("metrics", func(o *engines.Opts) (engines.Engine, error) {
		m := &metrics{}
		var err error
		if m.port, err = o.Int("port", -1, 0, 65535); err != nil {
			return nil, err
		}
		if m.addr, err = o.String("address", "127.0.0.1"); err != nil {
			return nil, err
		}
		if m.statsd, err = o.String("statsd", ""); err != nil {
			return nil, err
		}
		if m.statsd != "" {
			if _, _, err := net.SplitHostPort(m.statsd); err != nil {
				return nil, fmt.Errorf("option statsd: expected host:port, got %q", m.statsd)
			}
		}
		if m.datadog, err = o.Bool("datadog", false); err != nil {
			return nil, err
		}
		if m.interval, err = o.Seconds("interval", 10*time.Second); err != nil {
			return nil, err
		}
		if m.prefix, err = o.String("prefix", "halite"); err != nil {
			return nil, err
		}
		if m.port < 0 && m.statsd == "" {
			return nil, fmt.Errorf("option port or statsd is required (a Prometheus endpoint, a StatsD address, or both)")
		}
		return m, nil
	})
}

type metrics struct {
	addr     string
	port     int
	statsd   string
	datadog  bool
	interval time.Duration
	prefix   string
}

type series struct {
	name   string // metric name, without prefix
	dotted string // the StatsD name, without prefix: beacon.<beacon>.<key>.<key>
	minion string
	sub    string
}

type gauges struct {
	mu      sync.Mutex
	v       map[series]float64
	full    bool
	beacons uint64
}

func (m *metrics) Run(ctx context.Context, env *engines.Env) error {
	g := &gauges{v: map[series]float64{}}
	sub := env.Bus.Subscribe("salt/beacon/*", 65536)
	defer sub.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	if m.port >= 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(m.addr, strconv.Itoa(m.port)))
		if err != nil {
			return fmt.Errorf("metrics listen: %w", err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(rw, r)
				return
			}
			rw.Header().Set("Content-Type", "text/plain; version=0.0.4")
			rw.Write(m.prometheus(env, g))
		}), ReadHeaderTimeout: 10 * time.Second, ErrorLog: zap.NewStdLog(env.Log)}
		env.Log.Info("metrics endpoint", zap.String("url", "http://"+ln.Addr().String()+"/metrics"))
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("metrics serve: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			srv.Shutdown(sctx)
		}()
	}
	var push <-chan time.Time
	var conn net.Conn
	if m.statsd != "" {
		var err error
		if conn, err = net.Dial("udp", m.statsd); err != nil {
			return fmt.Errorf("metrics statsd %s: %w", m.statsd, err)
		}
		defer conn.Close()
		t := time.NewTicker(m.interval)
		defer t.Stop()
		push = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case ev, ok := <-sub.C():
			if !ok {
				return nil
			}
			g.record(env, ev.Tag, ev.Data)
		case <-push:
			for _, pkt := range m.statsdPackets(env, g) {
				conn.Write(pkt) // UDP: a lost packet is a lost sample, as with any StatsD client
			}
		}
	}
}

// record keeps the numbers of one beacon event.
func (g *gauges) record(env *engines.Env, tag string, data map[string]any) {
	// salt/beacon/<id>/<beacon>/<sub...>
	parts := strings.SplitN(tag, "/", 5)
	if len(parts) < 4 {
		return
	}
	minion, beacon, sub := parts[2], parts[3], ""
	if len(parts) == 5 {
		sub = parts[4]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.beacons++
	var walk func(prefix, dotted string, v any)
	walk = func(prefix, dotted string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "_stamp" || k == "id" {
					continue
				}
				walk(prefix+"_"+sanitize(k), dotted+"."+sanitize(k), e)
			}
			return
		}
		f, ok := number(v)
		if !ok {
			return
		}
		s := series{name: "beacon_" + sanitize(beacon) + prefix, dotted: "beacon." + sanitize(beacon) + dotted, minion: minion, sub: sub}
		if _, have := g.v[s]; !have && len(g.v) >= maxSeries {
			if !g.full {
				g.full = true
				env.Log.Warn("metrics: too many series; new ones are ignored", zap.Int("max", maxSeries))
			}
			return
		}
		g.v[s] = f
	}
	walk("", "", data)
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// daemonFigures are the bus's counters and the daemon's own, by name with
// Prometheus labels.
func daemonFigures(env *engines.Env) map[string]float64 {
	out := map[string]float64{}
	if env.Bus != nil {
		st := env.Bus.Stats()
		out["halite_bus_published_total"] = float64(st.Published)
		out["halite_bus_dropped_total"] = float64(st.Dropped)
		out["halite_bus_subscribers"] = float64(st.Subscribers)
	}
	if env.Figures != nil {
		for k, v := range env.Figures() {
			out[k] = v
		}
	}
	return out
}

func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// prometheus renders every figure in the Prometheus text format.
func (m *metrics) prometheus(env *engines.Env, g *gauges) []byte {
	var b bytes.Buffer
	figs := daemonFigures(env)
	names := make([]string, 0, len(figs))
	for k := range figs {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s %s\n", k, strconv.FormatFloat(figs[k], 'g', -1, 64))
	}
	g.mu.Lock()
	ss := make([]series, 0, len(g.v))
	for s := range g.v {
		ss = append(ss, s)
	}
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].name != ss[j].name {
			return ss[i].name < ss[j].name
		}
		if ss[i].minion != ss[j].minion {
			return ss[i].minion < ss[j].minion
		}
		return ss[i].sub < ss[j].sub
	})
	last := ""
	for _, s := range ss {
		name := m.prefix + "_" + s.name
		if name != last {
			fmt.Fprintf(&b, "# TYPE %s gauge\n", name)
			last = name
		}
		fmt.Fprintf(&b, "%s{minion=\"%s\"", name, labelValue(s.minion))
		if s.sub != "" {
			fmt.Fprintf(&b, ",sub=\"%s\"", labelValue(s.sub))
		}
		fmt.Fprintf(&b, "} %s\n", strconv.FormatFloat(g.v[s], 'g', -1, 64))
	}
	g.mu.Unlock()
	return b.Bytes()
}

// statsdPackets renders every figure as StatsD gauges, packed into UDP
// packets of at most 1,400 bytes.
func (m *metrics) statsdPackets(env *engines.Env, g *gauges) [][]byte {
	var lines []string
	for k, v := range daemonFigures(env) {
		name, labels, _ := strings.Cut(k, "{")
		lines = append(lines, m.statsdLine(strings.ReplaceAll(name, "_", "."), parseLabels(strings.TrimSuffix(labels, "}")), v))
	}
	g.mu.Lock()
	for s, v := range g.v {
		tags := map[string]string{"minion": s.minion}
		if s.sub != "" {
			tags["sub"] = s.sub
		}
		lines = append(lines, m.statsdLine(m.prefix+"."+s.dotted, tags, v))
	}
	g.mu.Unlock()
	sort.Strings(lines)
	var out [][]byte
	var cur []byte
	for _, l := range lines {
		if len(cur) > 0 && len(cur)+1+len(l) > 1400 {
			out = append(out, cur)
			cur = nil
		}
		if len(cur) > 0 {
			cur = append(cur, '\n')
		}
		cur = append(cur, l...)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func (m *metrics) statsdLine(name string, tags map[string]string, v float64) string {
	line := name + ":" + strconv.FormatFloat(v, 'g', -1, 64) + "|g"
	if m.datadog && len(tags) > 0 {
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var ts []string
		for _, k := range keys {
			ts = append(ts, k+":"+strings.NewReplacer(",", "_", "|", "_", "\n", "_").Replace(tags[k]))
		}
		line += "|#" + strings.Join(ts, ",")
	} else if len(tags) > 0 {
		// Plain StatsD has no tags: fold them into the name.
		keys := make([]string, 0, len(tags))
		for k := range tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		name2 := name
		for _, k := range keys {
			name2 += "." + sanitize(tags[k])
		}
		line = name2 + ":" + strconv.FormatFloat(v, 'g', -1, 64) + "|g"
	}
	return line
}

// parseLabels reads a="x",b="y".
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}
