package beacons

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/internal/yamlemit"
)

// DefaultInterval is a beacon's interval when it sets none: Salt's
// loop_interval, one second.
const DefaultInterval = time.Second

// Options configure a Manager.
type Options struct {
	ID     string // the agent's id, in every tag and as data["id"]
	Config any    // the beacons: option
	// Fire publishes one beacon event. The agent puts it on its own bus
	// and, with a master, in its outbox spool.
	Fire func(tag string, data map[string]any)
	// StateRunning reports whether a state run is in progress, for
	// disable_during_state_run; nil: never.
	StateRunning func() bool
	// SaveFile is where beacons.save writes the beacons: option
	// (CONFIG_DIR/agent.d/beacons.conf).
	SaveFile string
	Log      *zap.Logger
}

// Manager runs the configured beacons, one goroutine each, and changes
// them at run time (beacons.add, delete, modify, enable, disable).
type Manager struct {
	o   Options
	log *zap.Logger
	env *env

	mu      sync.Mutex
	specs   map[string]*Spec
	gen     map[string]uint64 // bumped by every change to a beacon
	enabled bool
	changed chan struct{}
	stats   map[string]*Stats
}

// Stats counts one beacon's work.
type Stats struct {
	Checks, Events, Errors uint64
	LastError              string
}

// New checks every configured beacon; a beacon with bad options is an
// error naming it and the option.
func New(o Options) (*Manager, error) {
	specs, enabled, err := ParseConfig(o.Config, DefaultInterval)
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	m := &Manager{o: o, log: o.Log, env: defaultEnv(), specs: map[string]*Spec{}, gen: map[string]uint64{},
		enabled: enabled, changed: make(chan struct{}, 1), stats: map[string]*Stats{}}
	for _, s := range specs {
		m.specs[s.Name] = s
	}
	return m, nil
}

// Len returns how many beacons are configured.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.specs)
}

type running struct {
	gen    uint64
	cancel context.CancelFunc
	done   chan struct{}
}

// Run runs the beacons until ctx ends, starting and stopping them as they
// are changed; it returns once every beacon goroutine has exited.
func (m *Manager) Run(ctx context.Context) error {
	runs := map[string]*running{}
	defer func() {
		for _, r := range runs {
			r.cancel()
			<-r.done
		}
	}()
	for {
		m.reconcile(ctx, runs)
		select {
		case <-ctx.Done():
			return nil
		case <-m.changed:
		}
	}
}

// reconcile stops the beacons that were changed, deleted or disabled and
// starts those that should run and do not.
func (m *Manager) reconcile(ctx context.Context, runs map[string]*running) {
	m.mu.Lock()
	want := map[string]*Spec{}
	gens := map[string]uint64{}
	for name, s := range m.specs {
		if m.enabled && s.Enabled {
			want[name] = s
			gens[name] = m.gen[name]
		}
	}
	m.mu.Unlock()
	for name, r := range runs {
		if s, ok := want[name]; !ok || s == nil || gens[name] != r.gen {
			r.cancel()
			<-r.done
			delete(runs, name)
		}
	}
	for name, s := range want {
		if _, ok := runs[name]; ok {
			continue
		}
		rctx, cancel := context.WithCancel(ctx)
		r := &running{gen: gens[name], cancel: cancel, done: make(chan struct{})}
		runs[name] = r
		go func() {
			defer close(r.done)
			m.runBeacon(rctx, s)
		}()
	}
}

// runBeacon evaluates one beacon every interval until ctx ends.
func (m *Manager) runBeacon(ctx context.Context, s *Spec) {
	b, err := s.build(m.env)
	if err != nil {
		m.log.Error("beacon not started", zap.String("beacon", s.Name), zap.Error(err))
		m.count(s.Name, 0, err)
		return
	}
	if c, ok := b.(interface{ Close() error }); ok {
		defer c.Close()
	}
	m.log.Info("beacon started", zap.String("beacon", s.Name), zap.String("module", s.Module), zap.Duration("interval", s.Interval))
	base := event.TagBeacon(m.o.ID, s.Name)
	last := map[string]map[string]any{} // onchangeonly: last data per tag
	first := true
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		if !(s.DisableDuringStateRun && m.o.StateRunning != nil && m.o.StateRunning()) {
			evs, err := b.Check(ctx)
			fired := 0
			if err != nil {
				m.log.Warn("beacon check failed", zap.String("beacon", s.Name), zap.Error(err))
			}
			seen := map[string]bool{}
			for _, ev := range evs {
				tag := base
				data := make(map[string]any, len(ev)+2)
				for k, v := range ev {
					if k == "tag" {
						tag += fmt.Sprint(v)
						continue
					}
					data[k] = v
				}
				if s.OnChangeOnly {
					seen[tag] = true
					prev, had := last[tag]
					if had && reflect.DeepEqual(prev, ev) {
						continue
					}
					last[tag] = ev // the beacon's own map, which Fire never sees
				}
				if first && !s.EmitAtStartup {
					continue
				}
				data["id"] = m.o.ID
				m.o.Fire(tag, data)
				fired++
			}
			if s.OnChangeOnly {
				for tag := range last {
					if !seen[tag] {
						delete(last, tag)
					}
				}
			}
			first = false
			m.count(s.Name, fired, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (m *Manager) count(name string, events int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.stats[name]
	if st == nil {
		st = &Stats{}
		m.stats[name] = st
	}
	st.Checks++
	st.Events += uint64(events)
	if err != nil {
		st.Errors++
		st.LastError = err.Error()
	}
}

// Stats returns a copy of each beacon's counters.
func (m *Manager) Stats() map[string]Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Stats, len(m.stats))
	for k, v := range m.stats {
		out[k] = *v
	}
	return out
}

func (m *Manager) poke() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// List returns the beacons: option as it now stands, in Salt's shape
// (each beacon a list of one-key mappings), with enabled: False when all
// beacons are disabled.
func (m *Manager) List() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]any, len(m.specs)+1)
	for name, s := range m.specs {
		keys := make([]string, 0, len(s.Raw))
		for k := range s.Raw {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		l := make([]any, 0, len(keys))
		for _, k := range keys {
			l = append(l, map[string]any{k: s.Raw[k]})
		}
		out[name] = l
	}
	if !m.enabled {
		out["enabled"] = false
	}
	return out
}

// Add adds a beacon; it is an error if one of that name exists or the
// options are bad.
func (m *Manager) Add(name string, cfg any) error {
	s, err := ParseSpec(name, cfg, DefaultInterval)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.specs[name]; ok {
		return fmt.Errorf("beacon %s is already configured", name)
	}
	m.specs[name] = s
	m.gen[name]++
	m.poke()
	return nil
}

// Modify replaces a beacon's options.
func (m *Manager) Modify(name string, cfg any) error {
	s, err := ParseSpec(name, cfg, DefaultInterval)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.specs[name]; !ok {
		return fmt.Errorf("beacon %s is not configured", name)
	}
	m.specs[name] = s
	m.gen[name]++
	m.poke()
	return nil
}

// Replace makes the beacons those of cfg, a beacons: option (the agent
// rereads its configuration on SIGHUP): beacons that are gone stop, new and
// changed ones (re)start, unchanged ones run on undisturbed. A bad cfg is
// an error and changes nothing.
func (m *Manager) Replace(cfg any) error {
	specs, enabled, err := ParseConfig(cfg, DefaultInterval)
	if err != nil {
		return err
	}
	want := make(map[string]*Spec, len(specs))
	for _, s := range specs {
		want[s.Name] = s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.specs {
		if _, ok := want[name]; !ok {
			delete(m.specs, name)
			m.gen[name]++
		}
	}
	for name, s := range want {
		if old, ok := m.specs[name]; ok && reflect.DeepEqual(old.Raw, s.Raw) {
			continue
		}
		m.specs[name] = s
		m.gen[name]++
	}
	m.enabled = enabled
	m.poke()
	return nil
}

// Delete removes a beacon.
func (m *Manager) Delete(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.specs[name]; !ok {
		return fmt.Errorf("beacon %s is not configured", name)
	}
	delete(m.specs, name)
	m.gen[name]++
	m.poke()
	return nil
}

// SetEnabled enables or disables one beacon, or with name "" all of them.
func (m *Manager) SetEnabled(name string, on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name == "" {
		m.enabled = on
		m.poke()
		return nil
	}
	s, ok := m.specs[name]
	if !ok {
		return fmt.Errorf("beacon %s is not configured", name)
	}
	c := *s
	c.Enabled = on
	c.Raw = make(map[string]any, len(s.Raw)+1)
	for k, v := range s.Raw {
		c.Raw[k] = v
	}
	c.Raw["enabled"] = on
	m.specs[name] = &c
	m.gen[name]++
	m.poke()
	return nil
}

// Save writes the beacons: option to Options.SaveFile, which the agent
// reads at its next start, and returns the file's name.
func (m *Manager) Save() (string, error) {
	if m.o.SaveFile == "" {
		return "", fmt.Errorf("no file to save beacons to")
	}
	b, err := yamlemit.Marshal(map[string]any{"beacons": m.List()})
	if err != nil {
		return "", fmt.Errorf("encode beacons: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(m.o.SaveFile), 0o755); err != nil {
		return "", fmt.Errorf("save beacons: %w", err)
	}
	tmp := m.o.SaveFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return "", fmt.Errorf("save beacons: %w", err)
	}
	if err := os.Rename(tmp, m.o.SaveFile); err != nil {
		return "", fmt.Errorf("save beacons: %w", err)
	}
	return m.o.SaveFile, nil
}
