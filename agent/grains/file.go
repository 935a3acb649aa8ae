package grains

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"

	"github.com/halite-fleet/halite/internal/yamlemit"
)

// maxFileSize bounds the grains file the agent reads, so a runaway file
// cannot exhaust a small device.
const maxFileSize = 1 << 20

// ErrNoFile is returned by UpdateFile when the Store has no grains file.
var ErrNoFile = errors.New("no grains file (the agent has no configuration directory)")

// NewFile is New with the static grains of file (Salt's /etc/salt/grains;
// Halite's CONFIG_DIR/grains) laid between the core grains and static, as
// Salt lays them: core grains, then the grains file, then the config file's
// grains:. A missing file is no grains; a bad one is logged and skipped, as
// Salt does ("Bad syntax in grains file! Skipping."). file "" is New.
func NewFile(id string, static map[string]any, file string, log *zap.Logger) *Store {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Store{id: id, static: static, file: file, log: log}
	s.Refresh()
	return s
}

// File returns the Store's grains file, "" when it has none.
func (s *Store) File() string { return s.file }

// BadFileError is a grains file that is not YAML.
type BadFileError struct {
	Path string
	Err  error
}

func (e *BadFileError) Error() string { return fmt.Sprintf("parse grains file %s: %v", e.Path, e.Err) }
func (e *BadFileError) Unwrap() error { return e.Err }

// ReadFile reads a grains file: a YAML mapping of grain to value. A missing
// or empty file, or one that is not a mapping, is no grains (as Salt's
// grains.setvals treats it); a file that is not YAML is an error.
func ReadFile(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read grains file: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFileSize+1)); err != nil {
		return nil, fmt.Errorf("read grains file %s: %w", path, err)
	}
	if buf.Len() > maxFileSize {
		return nil, fmt.Errorf("read grains file %s: larger than %d bytes", path, maxFileSize)
	}
	var v any
	if err := yaml.Unmarshal(buf.Bytes(), &v); err != nil {
		return nil, &BadFileError{Path: path, Err: err}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return map[string]any{}, nil
	}
	return m, nil
}

// writeFile replaces path with g in YAML block style (Salt's safe_dump with
// default_flow_style=False), through a temporary file and a rename so a
// crash leaves the old file or the new one, never half of one.
func writeFile(path string, g map[string]any) error {
	b, err := yamlemit.Encode(g, yamlemit.Options{Indent: 2})
	if err != nil {
		return fmt.Errorf("encode grains file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".grains-*")
	if err != nil {
		return fmt.Errorf("write grains file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write grains file: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("write grains file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write grains file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write grains file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write grains file: %w", err)
	}
	return nil
}

// UpdateFile reads the grains file afresh, lets change edit its grains,
// writes them back and refreshes the Store, returning the new grains (shared
// like Get's). A file that cannot be read or parsed is left untouched and
// its error returned; so is an error of change.
func (s *Store) UpdateFile(change func(file map[string]any) error) (map[string]any, error) {
	if s.file == "" {
		return nil, ErrNoFile
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fg, err := ReadFile(s.file)
	if err != nil {
		return nil, err
	}
	if err := change(fg); err != nil {
		return nil, err
	}
	if err := writeFile(s.file, fg); err != nil {
		return nil, err
	}
	return s.refreshLocked(), nil
}

// layers returns the static grains: the grains file's under the config's.
func (s *Store) layers() map[string]any {
	if s.file == "" {
		return s.static
	}
	fg, err := ReadFile(s.file)
	if err != nil {
		s.log.Warn("grains file skipped", zap.Error(err))
		fg = map[string]any{}
	}
	for k, v := range s.static {
		fg[k] = v
	}
	return fg
}
