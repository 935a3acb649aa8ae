package flash

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// state is the run's state file: one JSON line per device flashed, appended
// and synced as each one ends, so a run that stops (Ctrl-C, a crash, a
// closed laptop) is resumed by running the same command again.
type state struct {
	path string
	mu   sync.Mutex
	f    *os.File
	seen map[string]bool
}

type stateLine struct {
	Host   string    `json:"host"`
	ID     string    `json:"id"`
	Finger string    `json:"finger"`
	Arch   string    `json:"arch"`
	Time   time.Time `json:"time"`
}

func openState(path string) (*state, error) {
	s := &state{path: path, seen: map[string]bool{}}
	if path == "" {
		return s, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var l stateLine
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Host == "" {
			f.Close()
			return nil, fmt.Errorf("state file %s:%d: not a device line (%v): fix or remove the line", path, n, err)
		}
		s.seen[l.Host] = true
	}
	if err := sc.Err(); err != nil {
		f.Close()
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	s.f = f
	return s, nil
}

func (s *state) done(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[host]
}

func (s *state) record(r Result) error {
	if s.f == nil {
		return nil
	}
	b, err := json.Marshal(stateLine{Host: r.Addr, ID: r.ID, Finger: r.Finger, Arch: r.Arch, Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(append(b, '\n')); err != nil {
		return err
	}
	s.seen[r.Addr] = true
	return s.f.Sync()
}

func (s *state) close() {
	if s.f != nil {
		s.f.Close()
	}
}
