package ota

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/halite-fleet/halite/internal/atomicfile"
)

// Results of an update, the last part of their event tags
// (halite/firmware/<id>/<result>).
const (
	Updating   = "updating"
	Updated    = "updated"
	RolledBack = "rolled_back"
	Failed     = "failed"
)

// EnvMode is the environment variable that tells a starting agent how it
// was started by this package: ModeTrial (the child on trial) or
// ModeRestart (exec'd by the watchdog: already detached, nothing to
// detach again).
const (
	EnvMode     = "HALITE_OTA"
	ModeTrial   = "trial"
	ModeRestart = "restart"
)

// Mode reads EnvMode and removes it from the environment, so that the
// programs the agent runs do not inherit it.
func Mode() string {
	m := os.Getenv(EnvMode)
	os.Unsetenv(EnvMode)
	return m
}

// maxMarker bounds the marker and result files read back.
const maxMarker = 64 << 10

// Paths are the files of the A/B update of one binary.
type Paths struct {
	Bin, New, Prev, Trial, Last string
}

// PathsFor returns the paths beside bin.
func PathsFor(bin string) Paths {
	return Paths{Bin: bin, New: bin + ".new", Prev: bin + ".prev", Trial: bin + ".trial", Last: bin + ".ota"}
}

// Self returns the paths of the running binary (symlinks resolved); the
// build on trial, B.new, gets the paths of B.
func Self() (Paths, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return Paths{}, fmt.Errorf("locate the agent binary: %w", err)
	}
	return PathsFor(strings.TrimSuffix(exe, ".new")), nil
}

// Platform is the platform this binary was built for, as `make cross`
// names its outputs: linux-amd64, linux-arm64, linux-armv6, linux-armv7,
// linux-mipsle.
func Platform() string {
	arch := runtime.GOARCH
	if arch == "arm" {
		v := "7"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "GOARM" && s.Value != "" {
					v, _, _ = strings.Cut(s.Value, ",")
				}
			}
		}
		arch = "armv" + v
	}
	return runtime.GOOS + "-" + arch
}

// Marker is the trial marker, B.trial.
type Marker struct {
	Version string `json:"version"` // the build on trial
	From    string `json:"from"`    // the build it replaces
	SHA256  string `json:"sha256"`  // of B.new, hex
	JID     string `json:"jid,omitempty"`
	Started int64  `json:"started"` // Unix seconds
	Timeout int    `json:"timeout"` // seconds
	Reason  string `json:"reason,omitempty"`
}

// Result is the outcome of the last update, B.ota.
type Result struct {
	Result  string `json:"result"` // Updated or RolledBack
	Version string `json:"version"`
	From    string `json:"from"`
	JID     string `json:"jid,omitempty"`
	Reason  string `json:"reason,omitempty"`
	At      int64  `json:"at"`
}

// Data is r as event data.
func (r *Result) Data() map[string]any {
	d := map[string]any{"result": r.Result, "version": r.Version, "from": r.From, "at": r.At}
	if r.JID != "" {
		d["jid"] = r.JID
	}
	if r.Reason != "" {
		d["reason"] = r.Reason
	}
	return d
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMarker+1))
	if err != nil {
		return err
	}
	if len(b) > maxMarker {
		return fmt.Errorf("%s: larger than %d bytes", path, maxMarker)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o644)
}

// ReadTrial returns the trial marker, nil when there is none.
func ReadTrial(p Paths) (*Marker, error) {
	var m Marker
	err := readJSON(p.Trial, &m)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read trial marker: %w", err)
	}
	return &m, nil
}

// ReadLast returns the last result, nil when there is none.
func ReadLast(p Paths) (*Result, error) {
	var r Result
	err := readJSON(p.Last, &r)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read last update result: %w", err)
	}
	return &r, nil
}

// FileSHA256 hashes a file.
func FileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// syncDir makes the renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ErrBusy is Stage's refusal while a trial is pending.
var ErrBusy = errors.New("an update is on trial already")

// Stage fetches the build m describes to B.new (fetch writes it; a B.new
// that already has m.SHA256 is kept), checks its SHA-256 and size, makes
// it executable and durable, then writes the trial marker: from then on
// the next start of the agent, whatever happens, settles the trial.
func Stage(ctx context.Context, p Paths, m Marker, size int64, fetch func(ctx context.Context, dst string) error) error {
	if exists(p.Trial) {
		return ErrBusy
	}
	want := strings.ToLower(m.SHA256)
	if len(want) != 64 {
		return fmt.Errorf("stage update: sha256 %q is not 64 hex digits", m.SHA256)
	}
	if sum, n, err := FileSHA256(p.New); err != nil || sum != want || n != size {
		if err := fetch(ctx, p.New); err != nil {
			return fmt.Errorf("fetch build %s: %w", m.Version, err)
		}
	}
	sum, n, err := FileSHA256(p.New)
	if err != nil {
		return fmt.Errorf("stage update: %w", err)
	}
	if sum != want || n != size {
		os.Remove(p.New)
		return fmt.Errorf("stage update: %s is %d bytes with sha256 %s, want %d bytes with %s", p.New, n, sum, size, want)
	}
	f, err := os.OpenFile(p.New, os.O_RDWR, 0)
	if err == nil {
		err = f.Chmod(0o755)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = syncDir(filepath.Dir(p.New))
	}
	if err != nil {
		return fmt.Errorf("stage update: %w", err)
	}
	if testHookStaged != nil {
		testHookStaged()
	}
	m.SHA256 = want
	if m.Started == 0 {
		m.Started = time.Now().Unix()
	}
	if err := writeJSON(p.Trial, &m); err != nil {
		return fmt.Errorf("stage update: %w", err)
	}
	return nil
}

// Commit makes the build on trial the one that boots: B is linked to
// B.prev, then B.new renamed over B (the commit point). The trial child
// calls it once a master accepted its session.
func Commit(p Paths) error {
	if !exists(p.New) {
		if exists(p.Trial) {
			return nil // committed already
		}
		return errors.New("commit update: no build on trial")
	}
	if err := os.Remove(p.Prev); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("commit update: %w", err)
	}
	if err := os.Link(p.Bin, p.Prev); err != nil {
		return fmt.Errorf("commit update: keep the previous build: %w", err)
	}
	if testHookLinked != nil {
		testHookLinked()
	}
	if err := syncDir(filepath.Dir(p.Bin)); err != nil {
		return fmt.Errorf("commit update: %w", err)
	}
	if err := os.Rename(p.New, p.Bin); err != nil {
		return fmt.Errorf("commit update: %w", err)
	}
	if err := syncDir(filepath.Dir(p.Bin)); err != nil {
		return fmt.Errorf("commit update: %w", err)
	}
	return nil
}

// testHookStaged, when set (tests), runs between the fetched build's
// fsync and the marker.
var testHookStaged func()

// testHookLinked, when set (tests), runs between the link and the rename.
var testHookLinked func()

// reasonInterrupted is the reason of a trial that nobody finished.
const reasonInterrupted = "the trial did not finish: the device lost power, or the agent was killed or crashed"

// Recover settles what an update left behind, at a normal start (not on
// trial): nil when there is nothing, else the result to report, already
// recorded as the last result. The caller reports it (durably), then
// calls Finish.
func Recover(p Paths, running string) (*Result, error) {
	m, err := ReadTrial(p)
	if m == nil || err != nil {
		if err != nil {
			// An unreadable marker: the trial cannot be told apart;
			// B is what boots, so the trial did not commit unless
			// B.new is gone.
			m = &Marker{Reason: err.Error()}
		} else {
			return nil, nil
		}
	}
	r := &Result{Version: m.Version, From: m.From, JID: m.JID, At: time.Now().Unix()}
	if exists(p.New) {
		r.Result, r.Reason = RolledBack, m.Reason
		if r.Reason == "" {
			r.Reason = reasonInterrupted
		}
	} else {
		r.Result = Updated
		if running != m.Version {
			r.Reason = fmt.Sprintf("running %s after the update to %s", running, m.Version)
			r.Version = running
		}
	}
	if err := writeJSON(p.Last, r); err != nil {
		return r, fmt.Errorf("record update result: %w", err)
	}
	return r, nil
}

// Finish removes the marker, then (after a rollback) the build that
// failed: in this order, so that a cut between the two leaves no marker
// beside a missing B.new (which would read as committed).
func Finish(p Paths, r *Result) error {
	if err := os.Remove(p.Trial); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove trial marker: %w", err)
	}
	if err := syncDir(filepath.Dir(p.Trial)); err != nil {
		return fmt.Errorf("remove trial marker: %w", err)
	}
	if r != nil && r.Result == RolledBack {
		if err := os.Remove(p.New); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove failed build: %w", err)
		}
	}
	return nil
}

// fail records why the trial failed in the marker (kept otherwise: the
// next start reads it).
func fail(p Paths, reason string) error {
	m, err := ReadTrial(p)
	if err != nil || m == nil {
		return err
	}
	m.Reason = reason
	return writeJSON(p.Trial, m)
}
