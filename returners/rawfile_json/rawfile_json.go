// Package rawfile_json is the rawfile_json returner: one JSON object a
// line, appended to a file (returns as Salt's return dict, events as
// {"tag": ..., "data": ...}). It registers itself as "rawfile_json".
//
// Options: rawfile_json.filename (/var/log/halite/events).
package rawfile_json

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/halite-fleet/halite/returners"
)

func init() {
	returners.RegisterCaps("rawfile_json", returners.Caps{Event: true}, New)
}

// Returner appends to one file.
type Returner struct {
	mu   sync.Mutex
	path string
}

// New checks the option; the file is opened for each write, so it may be
// rotated away under the returner.
func New(_ context.Context, cfg returners.Config) (returners.Returner, error) {
	p := cfg.Options("rawfile_json").String("filename", "/var/log/halite/events")
	return &Returner{path: p}, nil
}

// Close does nothing.
func (r *Returner) Close() error { return nil }

func (r *Returner) write(lines ...any) error {
	var buf []byte
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return returners.Permanent(fmt.Errorf("rawfile_json: %w", err))
		}
		buf = append(append(buf, b...), '\n')
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
		return fmt.Errorf("rawfile_json: %w", err)
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("rawfile_json: %w", err)
	}
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("rawfile_json write %s: %w", r.path, err)
	}
	return nil
}

// Returner appends the return dict.
func (r *Returner) Returner(_ context.Context, ret map[string]any) error { return r.write(ret) }

// EventReturn appends each event.
func (r *Returner) EventReturn(_ context.Context, events []returners.Event) error {
	lines := make([]any, len(events))
	for i, ev := range events {
		lines[i] = ev
	}
	return r.write(lines...)
}
