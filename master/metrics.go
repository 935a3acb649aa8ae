package master

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/halite-fleet/halite/reactor"
)

// The master's Prometheus endpoint (metrics_port, off by default): an HTTP
// server on metrics_interface (127.0.0.1 by default) serving /metrics from
// a registry of the master's own, so that masters in one process (tests)
// do not share counters. Jobs and returns are counted where they happen;
// everything else (agents, relays, returner queues, reactor, event bus) is
// read from the master's state when the page is scraped.

// Bounds of what the metrics keep.
const (
	// trackedJobs and trackedAge bound the publish times kept for the
	// return latency histogram: a return of a job published longer ago,
	// or more jobs ago, or before the master started, is counted in
	// halite_master_returns_total but not in the histogram.
	trackedJobs = 1 << 16
	trackedAge  = 24 * time.Hour
	// maxRelayBeats bounds the relays whose last heartbeat is kept.
	maxRelayBeats = 4096
)

// latencyBuckets (seconds) span a device on the LAN answering at once to
// one behind a relay that comes back after an hour.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// masterMetrics is what the master counts for its metrics as it goes.
type masterMetrics struct {
	published prometheus.Counter
	returns   prometheus.Counter
	latency   prometheus.Histogram
	blobBytes prometheus.Counter
	pubs      pubTimes

	beatMu sync.Mutex
	beats  map[string]relayBeat // last heartbeat per relay id
}

func newMasterMetrics() *masterMetrics {
	return &masterMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "halite_master_jobs_published_total",
			Help: "Jobs the master published (operator, reactor and its own find_job jobs).",
		}),
		returns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "halite_master_returns_total",
			Help: "Returns stored, each counted once (a replayed return is not counted again).",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "halite_master_return_latency_seconds",
			Help:    "Time from a job's publication to each return of it, for jobs this master published in the last 24 hours since it started.",
			Buckets: latencyBuckets,
		}),
		blobBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "halite_master_blob_bytes_total",
			Help: "Bytes of file chunks the master served (BlobData), to agents and to relays for their devices.",
		}),
		pubs:  pubTimes{at: make(map[string]time.Time)},
		beats: make(map[string]relayBeat),
	}
}

// jobPublished records that job jid was published at t.
func (mm *masterMetrics) jobPublished(jid string, t time.Time) {
	mm.published.Inc()
	mm.pubs.add(jid, t)
}

// returned records a new return of job jid, arrived at t.
func (mm *masterMetrics) returned(jid string, t time.Time) {
	mm.returns.Inc()
	if at, ok := mm.pubs.get(jid); ok {
		d := t.Sub(at)
		if d < 0 {
			d = 0
		}
		mm.latency.Observe(d.Seconds())
	}
}

// pubTimes are the publish times of recent jobs, by jid, oldest dropped
// first once there are trackedJobs or they are trackedAge old.
type pubTimes struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string // jids in publish order; order[head:] are in at
	head  int
}

func (p *pubTimes) add(jid string, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.at[jid]; ok {
		return
	}
	p.at[jid] = t
	p.order = append(p.order, jid)
	for p.head < len(p.order) {
		old := p.order[p.head]
		if len(p.order)-p.head <= trackedJobs && t.Sub(p.at[old]) < trackedAge {
			break
		}
		delete(p.at, old)
		p.order[p.head] = ""
		p.head++
	}
	if p.head > len(p.order)/2 && p.head > 1024 {
		p.order = append([]string(nil), p.order[p.head:]...)
		p.head = 0
	}
}

func (p *pubTimes) get(jid string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.at[jid]
	return t, ok
}

// relayBeat is what the metrics keep of a relay's last heartbeat.
type relayBeat struct {
	at                     time.Time
	spoolBytes, spoolItems float64
	devices                float64
	spoolDropped           float64
	haveBytes, haveItems   bool
	haveDevices, haveDrops bool
}

// relayHeartbeat keeps what a relay's heartbeat event
// (halite/relay/<id>/heartbeat) says of its spool. Only a relay's own
// heartbeat counts: the tag must name the agent that sent it, and that
// agent must be allowed as a relay (relay_allow), which also bounds the
// relays kept. Fields that are not non-negative numbers are left out.
func (m *Master) relayHeartbeat(id, tag string, data map[string]any) {
	if tag != "halite/relay/"+id+"/heartbeat" || !m.relayAllowed(id) {
		return
	}
	var b relayBeat
	b.at = time.Now()
	b.spoolBytes, b.haveBytes = gaugeValue(data["spool_bytes"])
	b.spoolItems, b.haveItems = gaugeValue(data["spool_items"])
	b.devices, b.haveDevices = gaugeValue(data["devices"])
	b.spoolDropped, b.haveDrops = gaugeValue(data["spool_dropped"])
	mm := m.metrics
	mm.beatMu.Lock()
	defer mm.beatMu.Unlock()
	if _, ok := mm.beats[id]; !ok && len(mm.beats) >= maxRelayBeats {
		return
	}
	mm.beats[id] = b
}

// gaugeValue reads a number from an event's data: a non-negative, finite
// integer or float.
func gaugeValue(v any) (float64, bool) {
	var f float64
	switch v := v.(type) {
	case uint64:
		f = float64(v)
	case int64:
		f = float64(v)
	case int:
		f = float64(v)
	case float64:
		f = v
	default:
		return 0, false
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// serveMetrics serves /metrics on metrics_interface:metrics_port until ctx
// ends; with metrics_port 0 it does nothing.
func (m *Master) serveMetrics(ctx context.Context) error {
	if m.cfg.MetricsPort == 0 {
		return nil
	}
	addr := net.JoinHostPort(m.cfg.MetricsInterface, strconv.Itoa(m.cfg.MetricsPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           m.metricsHandler(),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          zap.NewStdLog(m.log.Named("metrics")),
	}
	m.log.Info("metrics listening", zap.Stringer("addr", ln.Addr()))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
		return nil
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("metrics serve: %w", err)
	}
}

// metricsHandler is the metrics server's handler: /metrics and nothing
// else.
func (m *Master) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	mm := m.metrics
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		mm.published, mm.returns, mm.latency, mm.blobBytes,
		masterCollector{m},
	)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            zap.NewStdLog(m.log.Named("metrics")),
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	return mux
}

// Descriptions of what masterCollector reads at each scrape.
var (
	descInfo          = prometheus.NewDesc("halite_master_info", "The master's version and id (always 1).", []string{"version", "id"}, nil)
	descAgents        = prometheus.NewDesc("halite_master_agents_connected", "Agents connected now, directly or behind a relay.", []string{"via"}, nil)
	descRelays        = prometheus.NewDesc("halite_master_relays_connected", "Relay links connected now.", nil, nil)
	descRelayDevices  = prometheus.NewDesc("halite_master_relay_devices", "Devices on each connected relay's link now.", []string{"relay"}, nil)
	descSpoolBytes    = prometheus.NewDesc("halite_relay_spool_bytes", "Bytes of returns and events a relay holds for the master, as its last heartbeat said.", []string{"relay"}, nil)
	descSpoolItems    = prometheus.NewDesc("halite_relay_spool_items", "Returns and events a relay holds for the master, as its last heartbeat said.", []string{"relay"}, nil)
	descSpoolDropped  = prometheus.NewDesc("halite_relay_spool_dropped_total", "Items a relay dropped from its spool since it started, as its last heartbeat said.", []string{"relay"}, nil)
	descBeatDevices   = prometheus.NewDesc("halite_relay_devices", "Devices a relay has connected and accepted, as its last heartbeat said.", []string{"relay"}, nil)
	descBeatTime      = prometheus.NewDesc("halite_relay_heartbeat_timestamp_seconds", "When the master received a relay's last heartbeat (Unix time).", []string{"relay"}, nil)
	descRetDepth      = prometheus.NewDesc("halite_master_returner_queue_depth", "Items waiting in a returner's on-disk queue.", []string{"returner"}, nil)
	descRetDead       = prometheus.NewDesc("halite_master_returner_dead_letters", "Items set aside (dead letters) in a returner's queue.", []string{"returner"}, nil)
	descRetDelivered  = prometheus.NewDesc("halite_master_returner_delivered_total", "Items a returner delivered.", []string{"returner"}, nil)
	descRetFailures   = prometheus.NewDesc("halite_master_returner_failures_total", "Failed deliveries of a returner (each retry counts).", []string{"returner"}, nil)
	descBusPublished  = prometheus.NewDesc("halite_master_events_published_total", "Events published on the master's event bus.", nil, nil)
	descBusDropped    = prometheus.NewDesc("halite_master_events_dropped_total", "Event deliveries lost to a full subscriber queue.", nil, nil)
	descBusSubs       = prometheus.NewDesc("halite_master_event_subscribers", "Open subscriptions to the master's event bus.", nil, nil)
	descHeld          = prometheus.NewDesc("halite_master_returns_held_bytes", "Bytes of returns held in memory because the job cache could not store them yet (bounded at 64 MiB).", nil, nil)
	descReactorEvents = prometheus.NewDesc("halite_master_reactor_events_total", "Events the reactor read.", nil, nil)
	reactorCounters   = []struct {
		desc *prometheus.Desc
		get  func(s reactorStats) uint64
	}{
		{descReactorEvents, func(s reactorStats) uint64 { return s.Events }},
		{prometheus.NewDesc("halite_master_reactor_matched_total", "Events that matched a reactor rule.", nil, nil), func(s reactorStats) uint64 { return s.Matched }},
		{prometheus.NewDesc("halite_master_reactor_queued_total", "Matched events queued for the reactor's workers.", nil, nil), func(s reactorStats) uint64 { return s.Queued }},
		{prometheus.NewDesc("halite_master_reactor_overflow_total", "Matched events lost to a full reactor queue (reactor_worker_hwm) or a lagging subscription.", nil, nil), func(s reactorStats) uint64 { return s.Overflow }},
		{prometheus.NewDesc("halite_master_reactor_rendered_total", "Reactor files rendered.", nil, nil), func(s reactorStats) uint64 { return s.Rendered }},
		{prometheus.NewDesc("halite_master_reactor_render_errors_total", "Reactor files that failed to render.", nil, nil), func(s reactorStats) uint64 { return s.RenderErrs }},
		{prometheus.NewDesc("halite_master_reactor_reactions_total", "Reactions dispatched.", nil, nil), func(s reactorStats) uint64 { return s.Reactions }},
		{prometheus.NewDesc("halite_master_reactor_failed_total", "Reactions that returned an error.", nil, nil), func(s reactorStats) uint64 { return s.Failed }},
		{prometheus.NewDesc("halite_master_reactor_looped_total", "Reactions refused by the loop guard (reactor_max_depth).", nil, nil), func(s reactorStats) uint64 { return s.Looped }},
	}
)

type reactorStats = reactor.Stats

// masterCollector reads the master's state at each scrape.
type masterCollector struct{ m *Master }

func (c masterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descAgents, descRelays, descRelayDevices, descSpoolBytes, descSpoolItems,
		descSpoolDropped, descBeatDevices, descBeatTime, descRetDepth, descRetDead, descRetDelivered, descRetFailures,
		descBusPublished, descBusDropped, descBusSubs, descHeld} {
		ch <- d
	}
	for _, rc := range reactorCounters {
		ch <- rc.desc
	}
}

func (c masterCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(descInfo, 1, Version, m.name)

	direct, relayed := m.minions.countSessions()
	gauge(descAgents, float64(direct), "direct")
	gauge(descAgents, float64(relayed), "relay")
	links := m.relays.list()
	gauge(descRelays, float64(len(links)))
	for id, n := range links {
		gauge(descRelayDevices, float64(n), id)
	}

	mm := m.metrics
	mm.beatMu.Lock()
	for id, b := range mm.beats {
		gauge(descBeatTime, float64(b.at.UnixMilli())/1000, id)
		if b.haveBytes {
			gauge(descSpoolBytes, b.spoolBytes, id)
		}
		if b.haveItems {
			gauge(descSpoolItems, b.spoolItems, id)
		}
		if b.haveDevices {
			gauge(descBeatDevices, b.devices, id)
		}
		if b.haveDrops {
			counter(descSpoolDropped, b.spoolDropped, id)
		}
	}
	mm.beatMu.Unlock()

	if m.returners != nil {
		for _, st := range m.returners.Statuses() {
			gauge(descRetDepth, float64(st.Depth), st.Name)
			gauge(descRetDead, float64(st.Dead), st.Name)
			counter(descRetDelivered, float64(st.Delivered), st.Name)
			counter(descRetFailures, float64(st.Failures), st.Name)
		}
	}

	bs := m.bus.Stats()
	counter(descBusPublished, float64(bs.Published))
	counter(descBusDropped, float64(bs.Dropped))
	gauge(descBusSubs, float64(bs.Subscribers))
	m.held.mu.Lock()
	held := m.held.bytes
	m.held.mu.Unlock()
	gauge(descHeld, float64(held))

	if e := m.ReactorEngine(); e != nil {
		s := e.Stats()
		for _, rc := range reactorCounters {
			counter(rc.desc, float64(rc.get(s)))
		}
	}
}
