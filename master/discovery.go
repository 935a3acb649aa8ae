package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/internal/atomicfile"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// The relays' site inventories (relay/discovery): a relay with a
// discovery: section sends each device it finds, and each change, as its
// own event halite/relay/<relay>/discovery/new|changed (the whole record
// in the data) or .../gone (its key), on its agent session, which is
// authenticated and acknowledged and spools while the master is away.
// The master keeps the latest record of each device of each relay named
// by relay_allow, in cachedir/discovery/<relay>.cbor (written at most
// every few seconds, and when the master stops), for discovery.list; the
// events also go on the bus, for the reactor.

// Bounds of what one relay may store here: as many records as a relay's
// discovery: max_devices may hold.
const (
	maxDiscoveryRecords = 1 << 16
	maxDiscoveryKey     = 64
	discoverySaveEvery  = 5 * time.Second
)

type discoveryStore struct {
	dir    string
	mu     sync.Mutex
	loaded bool
	relays map[string]map[string]map[string]any // relay -> key -> record
	dirty  map[string]bool
}

func (m *Master) discovery() *discoveryStore {
	m.discOnce.Do(func() {
		m.disc = &discoveryStore{dir: filepath.Join(m.cfg.CacheDir, "discovery"),
			relays: map[string]map[string]map[string]any{}, dirty: map[string]bool{}}
	})
	return m.disc
}

// load reads the saved inventories once. Under s.mu.
func (s *discoveryStore) load(log *zap.Logger) {
	if s.loaded {
		return
	}
	s.loaded = true
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".cbor")
		if !ok || protocol.ValidID(id) != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		var recs map[string]map[string]any
		if err == nil {
			err = protocol.Unmarshal(b, &recs)
		}
		if err != nil {
			log.Warn("discovery inventory unreadable: dropped", zap.String("relay", id), zap.Error(err))
			continue
		}
		s.relays[id] = recs
	}
}

// discoveryEvent applies a relay's discovery event to its inventory. Only
// a relay named by relay_allow, under its own id, is heard.
func (m *Master) discoveryEvent(id, tag string, data map[string]any) {
	what, ok := strings.CutPrefix(tag, "halite/relay/"+id+"/discovery/")
	if !ok || !m.relayAllowed(id) {
		return
	}
	key, _ := data["key"].(string)
	if key == "" || len(key) > maxDiscoveryKey {
		m.log.Warn("discovery event without a valid key", zap.String("relay", id), zap.String("tag", tag))
		return
	}
	s := m.discovery()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load(m.log)
	recs := s.relays[id]
	switch what {
	case "new", "changed":
		if recs == nil {
			recs = map[string]map[string]any{}
			s.relays[id] = recs
		}
		if _, have := recs[key]; !have && len(recs) >= maxDiscoveryRecords {
			m.log.Warn("discovery inventory full: device dropped", zap.String("relay", id), zap.String("key", key))
			return
		}
		recs[key] = data
	case "gone":
		delete(recs, key)
	default:
		return
	}
	s.dirty[id] = true
}

// discoveryLoop saves the inventories that changed, every few seconds and
// once more when ctx ends.
func (m *Master) discoveryLoop(ctx context.Context) error {
	t := time.NewTicker(discoverySaveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.saveDiscovery()
			return nil
		case <-t.C:
			m.saveDiscovery()
		}
	}
}

func (m *Master) saveDiscovery() {
	if m.disc == nil {
		return
	}
	s := m.disc
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.dirty {
		if err := s.save(id); err != nil {
			m.log.Warn("discovery inventory not saved", zap.String("relay", id), zap.Error(err))
			continue
		}
		delete(s.dirty, id)
	}
}

// save writes one relay's inventory. Under s.mu.
func (s *discoveryStore) save(id string) error {
	path := filepath.Join(s.dir, id+".cbor")
	recs := s.relays[id]
	if len(recs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := protocol.Marshal(recs)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

func discoveryRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{"discovery.list": m.runDiscoveryList}
}

// runDiscoveryList is discovery.list [relay=GLOB] [unmanaged=True]
// [KEY=GLOB ...]: the devices the relays found, by relay, each relay's
// sorted by key. Other keyword arguments match the record's fields
// (vendor, mac, ip, and the ONVIF facts: model, manufacturer, hardware,
// name) with a glob.
func (m *Master) runDiscoveryList(_ context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	relayGlob, err := a.str(0, "relay", false)
	if err != nil {
		return nil, err
	}
	unmanaged, err := a.boolean(-1, "unmanaged")
	if err != nil {
		return nil, err
	}
	match := map[string]string{}
	for k, v := range req.Kwarg {
		switch k {
		case "relay", "unmanaged":
		case "vendor", "mac", "ip", "model", "manufacturer", "hardware", "name":
			match[k] = fmt.Sprint(v)
		default:
			if !strings.HasPrefix(k, "__") {
				return nil, badRequest("discovery.list: unknown argument %q (relay, unmanaged, vendor, mac, ip, model, manufacturer, hardware, name)", k)
			}
		}
	}
	s := m.discovery()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.load(m.log)
	out := map[string]any{}
	for id, recs := range s.relays {
		if relayGlob != "" && !targets.MatchGlob(relayGlob, id) {
			continue
		}
		keys := make([]string, 0, len(recs))
		for k := range recs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		list := []any{}
		for _, k := range keys {
			r := recs[k]
			if unmanaged && r["managed"] == true {
				continue
			}
			if !discoveryMatch(r, match) {
				continue
			}
			list = append(list, r)
		}
		out[id] = list
	}
	return out, nil
}

// discoveryMatch reports whether record r has every field of match.
func discoveryMatch(r map[string]any, match map[string]string) bool {
	for k, glob := range match {
		var vals []string
		switch k {
		case "vendor", "mac":
			vals = []string{fmt.Sprint(r[k])}
		case "ip":
			if l, ok := r["ips"].([]any); ok {
				for _, v := range l {
					vals = append(vals, fmt.Sprint(v))
				}
			}
		default:
			if o, ok := r["onvif"].(map[string]any); ok {
				vals = []string{fmt.Sprint(o[k])}
			}
		}
		hit := false
		for _, v := range vals {
			if targets.MatchGlob(glob, v) {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return true
}
