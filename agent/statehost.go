package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/halite-fleet/halite/agent/blob"
	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/grains"
	"github.com/halite-fleet/halite/agent/state"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/protocol"
)

// The agent is the state system's host (agent/state.Host): state modules
// run execution functions through its executor, fire events through its
// outbox (or its own bus when masterless), and keep their data under
// cachedir/state. halite-call, which runs functions in its own process,
// has CallHost.

var (
	_ state.Host = (*Agent)(nil)
	_ state.Host = (*CallHost)(nil)
)

// ID is the agent's id.
func (a *Agent) ID() string { return a.cfg.ID }

// Grains returns the agent's grains.
func (a *Agent) Grains() map[string]any { return a.grains.Get() }

// Exec runs an execution function for a state.
func (a *Agent) Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	return execFor(ctx, a.exec, fun, args, kwargs)
}

func execFor(ctx context.Context, ex *exec.Executor, fun string, args []any, kwargs map[string]any) (any, error) {
	if ex == nil {
		return nil, exec.ErrNoHost
	}
	jid := fmt.Sprintf("%020d", time.Now().UnixMicro())
	res := ex.Run(ctx, exec.Request{JID: jid, Fun: fun, Args: args, Kwargs: kwargs, User: "state"})
	if !res.Success {
		return res.Return, fmt.Errorf("%v", res.Return)
	}
	return res.Return, nil
}

// Fire sends a state's event (event.send, state_events): to the master
// through the spool, or on the agent's own bus when masterless.
func (a *Agent) Fire(tag string, data map[string]any) error {
	if a.masterless() {
		return a.FireLocal(tag, data)
	}
	return a.SendEvent(tag, data)
}

// CacheDir is cachedir/state.
func (a *Agent) CacheDir() string { return stateCacheDir(a.cfg.CacheDir) }

func stateCacheDir(cachedir string) string {
	d := filepath.Join(cachedir, "state")
	os.MkdirAll(d, 0o700)
	return d
}

// Opts are the agent's options by Salt's names (the state functions read
// test, failhard, state_events, state_queue, file_roots).
func (a *Agent) Opts() map[string]any { return a.cfg.Opts() }

// Running lists the running jobs (state.running, the one-state-run rule).
func (a *Agent) Running() []map[string]any { return a.exec.Running() }

// CallHost is halite-call's state host: its own executor and grains; its
// events go through the running agent's local socket.
type CallHost struct {
	cfg    *config.Agent
	grains *grains.Store
	opts   map[string]any
	ex     *exec.Executor
	fetch  bool // FetchThroughAgent
}

// NewCallHost makes halite-call's host; give it the executor with
// SetExecutor (the executor is made with the host).
func NewCallHost(cfg *config.Agent, g *grains.Store, opts map[string]any) *CallHost {
	return &CallHost{cfg: cfg, grains: g, opts: opts}
}

// FetchThroughAgent makes the host fetch the salt:// files too large for
// the job (their manifests in a job the master compiled for halite-call)
// through the running agent (local op "blob.fetch"), which fetches them
// from its master.
func (h *CallHost) FetchThroughAgent() { h.fetch = true }

// Fetcher is the running agent's fetch, after FetchThroughAgent; nil
// otherwise (a masterless call has no master to fetch from).
func (h *CallHost) Fetcher() blob.Fetcher {
	if !h.fetch {
		return nil
	}
	return callFetcher{socket: h.cfg.SocketPath()}
}

// callFetcher asks the running agent to fetch a file by its manifest.
type callFetcher struct{ socket string }

func (f callFetcher) Fetch(ctx context.Context, m protocol.Manifest, dst string) error {
	sum := hex.EncodeToString(m.SHA256)
	resp, err := LocalCallWithin(ctx, f.socket, &LocalRequest{Op: "blob.fetch", Data: map[string]any{"sha256": sum}}, callFetchTimeout+10*time.Second)
	if err != nil {
		return err
	}
	if !resp.OK {
		return errors.New(resp.Error)
	}
	p, _ := resp.Return.(string)
	if p == "" {
		return errors.New("the agent did not say where it put the file")
	}
	if p != dst {
		return os.Rename(p, dst)
	}
	return nil
}

// SetExecutor sets the executor Exec runs functions with.
func (h *CallHost) SetExecutor(ex *exec.Executor) { h.ex = ex }

func (h *CallHost) ID() string                { return h.cfg.ID }
func (h *CallHost) Grains() map[string]any    { return h.grains.Get() }
func (h *CallHost) CacheDir() string          { return stateCacheDir(h.cfg.CacheDir) }
func (h *CallHost) Opts() map[string]any      { return h.opts }
func (h *CallHost) Running() []map[string]any { return h.ex.Running() }

func (h *CallHost) Exec(ctx context.Context, fun string, args []any, kwargs map[string]any) (any, error) {
	return execFor(ctx, h.ex, fun, args, kwargs)
}

// Fire hands the event to the running agent: to its master, or with
// --local to its own bus.
func (h *CallHost) Fire(tag string, data map[string]any) error {
	op := "event.send"
	if h.opts["local"] == true || h.cfg.FileClient == "local" {
		op = "event.fire"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := LocalCall(ctx, h.cfg.SocketPath(), &LocalRequest{Op: op, Tag: tag, Data: data})
	if err != nil {
		return err
	}
	if !resp.OK {
		return fmt.Errorf("event not sent: %s", resp.Error)
	}
	return nil
}
