package agent

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/exec"
	"github.com/halite-fleet/halite/agent/ota"
	"github.com/halite-fleet/halite/protocol"
)

// Over-the-air updates of the agent itself (package agent/ota has the
// design): firmware.update stages the build the master's job names and
// hands over to the watchdog (main calls Handoff after Run); a build on
// trial commits when a master accepts its session; every other start
// settles what an update left (settleUpdate) and fires its event.

// Grains the agent reports about its own build: the master picks a
// device's build for firmware.update by halite_platform, and a rollout
// skips the devices whose halite_version is the target already.
const (
	grainPlatform = "halite_platform"
	grainVersion  = "halite_version"
)

// TagFirmware is the tag of an update's event: halite/firmware/<id>/<what>,
// what being updating, updated, rolled_back or failed.
func TagFirmware(id, what string) string { return "halite/firmware/" + id + "/" + what }

type otaState struct {
	paths   ota.Paths
	pathErr error // the binary could not be located: no updates
	trial   bool  // this process is a build on trial

	mu      sync.Mutex
	stop    context.CancelFunc // stops Run
	handoff *ota.Marker        // a staged build: main watches its trial
	busy    bool               // an update is being staged

	commit sync.Once
}

func init() {
	exec.Register("firmware.update", `Install another build of the agent, with rollback: the master's job
carries the build for this device's platform (halite_platform) from its
firmware_dir. The build is fetched beside the running one, then started on
trial; unless a master accepts it within update_trial_timeout the old build
runs again. Events: halite/firmware/<id>/updating, then updated,
rolled_back or failed.

    halite '*' firmware.update version=1.4.0`, firmwareUpdate)
	exec.Register("firmware.status", `The agent's build and its updates: the running version and
platform, the binary, the pending trial (if any) and the last result.`, firmwareStatus)
}

func firmwareHost(host any) (*Agent, error) {
	a, ok := host.(*Agent)
	if !ok || a == nil {
		return nil, exec.ErrNoHost
	}
	return a, nil
}

func firmwareUpdate(ctx context.Context, host any, req exec.Request) (any, error) {
	a, err := firmwareHost(host)
	if err != nil {
		return nil, err
	}
	return a.firmwareUpdate(ctx, req)
}

func firmwareStatus(_ context.Context, host any, _ exec.Request) (any, error) {
	a, err := firmwareHost(host)
	if err != nil {
		return nil, err
	}
	return a.firmwareStatus()
}

// initOTA locates the binary and marks this process a build on trial when
// its watchdog says so (halite-agent's main: SetTrial).
func (a *Agent) initOTA() {
	a.ota.paths, a.ota.pathErr = ota.Self()
}

// SetTrial marks this agent a build on trial (HALITE_OTA=trial): it
// commits itself once a master accepts its session, then Run returns.
// Call before Run.
func (a *Agent) SetTrial() { a.ota.trial = true }

// Handoff is the build firmware.update staged before Run returned: the
// caller runs the watchdog (WatchUpdate). nil: none.
func (a *Agent) Handoff() *ota.Marker {
	a.ota.mu.Lock()
	defer a.ota.mu.Unlock()
	return a.ota.handoff
}

// OTAPaths are the files of this agent's updates.
func (a *Agent) OTAPaths() ota.Paths { return a.ota.paths }

// stopRun ends Run, as ctx's end would.
func (a *Agent) stopRun() {
	a.ota.mu.Lock()
	stop := a.ota.stop
	a.ota.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// handOver stops Run for the staged build once the master has
// acknowledged what waits in out (the firmware.update return, so that the
// caller hears of the trial at once), or after 3 s: what is left waits in
// the spool for the next build to send.
func (a *Agent) handOver(ctx context.Context, out *outbox) {
	deadline := time.Now().Add(3 * time.Second)
	for out.spool.len() > 0 && a.nconn.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	a.stopRun()
}

// trialAccepted commits a build on trial at its first accepted session,
// then stops it: the watchdog restarts the committed build.
func (a *Agent) trialAccepted(master string) {
	if !a.ota.trial {
		return
	}
	a.ota.commit.Do(func() {
		if err := ota.Commit(a.ota.paths); err != nil {
			a.log.Error("update on trial: a master accepted this build, but it could not be made the one that boots; the old build comes back",
				zap.String("master", master), zap.Error(err))
		} else {
			a.log.Info("update on trial: a master accepted this build; it is the one that boots now",
				zap.String("master", master), zap.String("version", Version))
		}
		a.stopRun()
	})
}

// settleUpdate, at a normal start, reports what the last update became
// (ota.Recover) and cleans up after it.
func (a *Agent) settleUpdate() {
	if a.ota.trial || a.ota.pathErr != nil {
		return
	}
	r, err := ota.Recover(a.ota.paths, Version)
	if err != nil {
		a.log.Error("update: settling the last update", zap.Error(err))
	}
	if r == nil {
		return
	}
	a.log.Info("update: "+r.Result, zap.String("version", r.Version), zap.String("from", r.From), zap.String("reason", r.Reason))
	if err := a.Fire(TagFirmware(a.cfg.ID, r.Result), r.Data()); err != nil {
		a.log.Error("update: event not sent", zap.String("result", r.Result), zap.Error(err))
	}
	if err := ota.Finish(a.ota.paths, r); err != nil {
		a.log.Error("update: clean up", zap.Error(err))
	}
}

func (a *Agent) firmwareStatus() (any, error) {
	out := map[string]any{"version": Version, "platform": ota.Platform(), "on_trial": a.ota.trial,
		"trial": false, "last": nil}
	if a.ota.pathErr != nil {
		out["error"] = a.ota.pathErr.Error()
		return out, nil
	}
	out["binary"] = a.ota.paths.Bin
	if m, err := ota.ReadTrial(a.ota.paths); err != nil {
		out["trial"] = err.Error()
	} else if m != nil {
		out["trial"] = map[string]any{"version": m.Version, "from": m.From, "sha256": m.SHA256, "jid": m.JID,
			"started": m.Started, "timeout": m.Timeout}
	}
	if r, err := ota.ReadLast(a.ota.paths); err != nil {
		out["last"] = err.Error()
	} else if r != nil {
		out["last"] = r.Data()
	}
	return out, nil
}

// forThisAgent checks a job's __for__ (when it has one) names this agent.
func (a *Agent) forThisAgent(kw map[string]any) error {
	v, ok := kw["__for__"]
	if !ok {
		return nil
	}
	ids, _ := v.([]any)
	for _, id := range ids {
		if s, _ := id.(string); s == a.cfg.ID {
			return nil
		}
	}
	return exec.Commandf("refused: this job's build was chosen for other devices, not %s", a.cfg.ID)
}

func (a *Agent) firmwareUpdate(ctx context.Context, req exec.Request) (any, error) {
	if err := a.forThisAgent(req.Kwargs); err != nil {
		return nil, err
	}
	fw, ok := req.Kwargs["__firmware__"].(map[string]any)
	if !ok {
		return nil, exec.Commandf("firmware.update runs as a master's job: the master picks the build from its firmware_dir")
	}
	version, _ := fw["version"].(string)
	data := map[string]any{"version": version, "from": Version, "jid": req.JID}
	failed := func(err error) (any, error) {
		data["reason"] = err.Error()
		a.Fire(TagFirmware(a.cfg.ID, ota.Failed), data)
		return nil, err
	}
	if msg, _ := fw["error"].(string); msg != "" {
		return failed(exec.Commandf("%s", msg))
	}
	if p, _ := fw["platform"].(string); p != ota.Platform() {
		return failed(exec.Commandf("the job's build is for %s; this agent is a %s build", p, ota.Platform()))
	}
	if version == Version {
		data["reason"] = "already running " + version
		a.Fire(TagFirmware(a.cfg.ID, ota.Updated), data)
		return map[string]any{"result": "current", "version": Version}, nil
	}
	switch {
	case a.ota.pathErr != nil:
		return failed(exec.Commandf("%v", a.ota.pathErr))
	case a.ota.trial:
		return failed(exec.Commandf("this agent is a build on trial itself"))
	}
	size, sum, err := buildOf(fw)
	if err != nil {
		return failed(exec.Commandf("the job's build: %v", err))
	}
	a.ota.mu.Lock()
	busy := a.ota.busy || a.ota.handoff != nil
	a.ota.busy = true
	a.ota.mu.Unlock()
	if busy {
		return failed(exec.Commandf("another update is going on"))
	}
	defer func() {
		a.ota.mu.Lock()
		a.ota.busy = false
		a.ota.mu.Unlock()
	}()
	a.Fire(TagFirmware(a.cfg.ID, ota.Updating), data)
	m := ota.Marker{Version: version, From: Version, SHA256: sum, JID: req.JID, Timeout: a.cfg.UpdateTrialTimeout}
	start := time.Now()
	err = ota.Stage(ctx, a.ota.paths, m, size, func(ctx context.Context, dst string) error {
		return a.fetchBuild(ctx, fw, dst)
	})
	if errors.Is(err, ota.ErrBusy) {
		return failed(exec.Commandf("an update is on trial already (%s)", a.ota.paths.Trial))
	}
	if err != nil {
		return failed(exec.Commandf("%v", err))
	}
	a.log.Info("update: build staged; handing over to it on trial", zap.String("version", version),
		zap.Int64("bytes", size), zap.Duration("fetch", time.Since(start)))
	a.ota.mu.Lock()
	a.ota.handoff = &m
	a.ota.mu.Unlock()
	// runJob hands over once the return is queued (handOver); this is
	// the bound when the function ran otherwise (a scheduled job).
	time.AfterFunc(10*time.Second, a.stopRun)
	return map[string]any{"result": "trial", "version": version, "from": Version, "platform": ota.Platform(),
		"sha256": sum, "size": size, "trial_timeout": a.cfg.UpdateTrialTimeout}, nil
}

// buildOf reads the size and SHA-256 of the job's build (its manifest).
func buildOf(fw map[string]any) (int64, string, error) {
	m, err := protocol.ManifestFromAny(fw["manifest"])
	if err == nil {
		err = m.Validate()
	}
	if err != nil {
		return 0, "", err
	}
	return m.Size, hex.EncodeToString(m.SHA256), nil
}
