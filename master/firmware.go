package master

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/event"
	"github.com/halite-fleet/halite/master/api"
	"github.com/halite-fleet/halite/protocol"
)

// Over-the-air updates, the master's side: firmware.update is published as
// one signed job per platform, each carrying the manifest (size, SHA-256,
// chunk hashes) of firmware_dir/<version>/<platform>/halite-agent and the
// ids it is for (__for__); the agent fetches the chunks (BlobGet) and runs
// the build on trial (agent/ota). firmware.rollout updates a target batch
// by batch, and halts past its failure budget.

const (
	fwFun         = "firmware.update"
	fwBinary      = "halite-agent"
	fwMaxNameLen  = 64
	grainPlatform = "halite_platform" // agent/firmware.go
	grainVersion  = "halite_version"
)

// fwName checks a version or platform that becomes a path component
// (platforms come from devices' grains: hostile input).
func fwName(what, s string) error {
	if s == "" || len(s) > fwMaxNameLen || s == "." || s == ".." {
		return fmt.Errorf("%s %q: want 1 to %d characters", what, s, fwMaxNameLen)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._+-~", c)) {
			return fmt.Errorf("%s %q: only letters, digits and . _ + - ~", what, s)
		}
	}
	return nil
}

// fwVersion reads firmware.update's version (version=V or the first
// argument).
func fwVersion(req *api.Request) (string, error) {
	v, ok := req.Kwarg["version"]
	if !ok && len(req.Arg) > 0 {
		v, ok = req.Arg[0], true
	}
	if !ok {
		return "", badRequest("firmware.update: missing required argument \"version\"")
	}
	s := fmt.Sprint(v)
	if err := fwName("version", s); err != nil {
		return "", badRequest("firmware.update: %v", err)
	}
	return s, nil
}

// firmwareJobs signs firmware.update's variants: one per platform of the
// targeted devices, each with its build's manifest in
// Kwarg["__firmware__"] (or the reason there is none: the device returns
// it as its failure) and the ids in "__for__". nil for other functions.
func (m *Master) firmwareJobs(req *api.Request, jb *protocol.JobBody, minions []string) (*stateJobs, error) {
	if req.Fun != fwFun || len(req.Funs) > 0 {
		return nil, nil
	}
	version, err := fwVersion(req)
	if err != nil {
		return nil, err
	}
	byPlatform := map[string][]string{}
	for _, id := range minions {
		p, _ := m.minions.grainsOf(id)[grainPlatform].(string)
		byPlatform[p] = append(byPlatform[p], id)
	}
	platforms := make([]string, 0, len(byPlatform))
	for p := range byPlatform {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)
	sj := &stateJobs{}
	for _, p := range platforms {
		fw := m.firmwareBuild(version, p)
		ids := byPlatform[p]
		for start := 0; start < len(ids); start += maxForIDs {
			part := ids[start:min(start+maxForIDs, len(ids))]
			b := *jb
			b.Kwarg = make(map[string]any, len(jb.Kwarg)+2)
			for k, v := range jb.Kwarg {
				b.Kwarg[k] = v
			}
			b.Kwarg["__firmware__"] = fw
			b.Kwarg["__for__"] = toAnyList(part)
			job, err := protocol.SignJob(m.id.Priv, &b)
			if err != nil {
				return nil, fmt.Errorf("sign job: %w", err)
			}
			body, err := protocol.Encode(job)
			if err != nil {
				return nil, fmt.Errorf("encode job: %w", err)
			}
			if len(body) > maxJobBody {
				return nil, badRequest("firmware.update: the job is %d bytes encoded, more than the %d a device reads", len(body), maxJobBody)
			}
			sj.groups = append(sj.groups, stateGroup{ids: part, job: job, wire: protocol.AppendFrame(nil, body), many: true})
		}
	}
	return sj, nil
}

// firmwareBuild is the __firmware__ of version's build for platform: its
// manifest, or the error the device reports.
func (m *Master) firmwareBuild(version, platform string) map[string]any {
	fw := map[string]any{"version": version, "platform": platform}
	if err := fwName("platform", platform); err != nil {
		fw["error"] = fmt.Sprintf("the master does not know this device's platform (grain %s): %v", grainPlatform, err)
		return fw
	}
	if m.cfg.FirmwareDir == "" {
		fw["error"] = "the master has no firmware_dir"
		return fw
	}
	path := filepath.Join(m.cfg.FirmwareDir, version, platform, fwBinary)
	man, err := m.firmwareManifest(path)
	if errors.Is(err, os.ErrNotExist) {
		fw["error"] = fmt.Sprintf("the master has no build %s for %s (%s)", version, platform, path)
		return fw
	}
	if err != nil {
		m.log.Error("firmware build", zap.String("path", path), zap.Error(err))
		fw["error"] = fmt.Sprintf("the master cannot serve build %s for %s: %v", version, platform, err)
		return fw
	}
	fw["manifest"] = man
	return fw
}

// rollout is one firmware.rollout's bookkeeping.
type rollout struct {
	version              string
	updated, rolledBack  []string
	failed, timedOut     []string
	skipped, unreachable []string
	of                   int // devices to update
}

func (r *rollout) failures() int { return len(r.rolledBack) + len(r.failed) + len(r.timedOut) }

// report gives the rollout's progress after device id's outcome.
func (r *rollout) report(ctx context.Context, id, what string) {
	progress(ctx, map[string]any{
		"message": fmt.Sprintf("%s %s: %d of %d updated, %d failed", id, what, len(r.updated), r.of, r.failures()),
		"id":      id, "outcome": what, "updated": len(r.updated), "of": r.of, "failures": r.failures(),
	})
}

// fraction reads "10%" (of n, at least 1 when above 0%) or a count.
func fraction(v any, n int, what string) (int, error) {
	s := strings.TrimSpace(fmt.Sprint(v))
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, badRequest("firmware.rollout: %s %q: want a percentage 0%% to 100%% or a count", what, s)
		}
		c := int(f * float64(n) / 100)
		if f > 0 && c == 0 {
			c = 1
		}
		return c, nil
	}
	c, err := strconv.Atoi(s)
	if err != nil || c < 0 {
		return 0, badRequest("firmware.rollout: %s %q: want a percentage or a count", what, s)
	}
	return c, nil
}

func firmwareRunners(m *Master) map[string]callFunc {
	return map[string]callFunc{"firmware.rollout": m.runFirmwareRollout}
}

// runFirmwareRollout is firmware.rollout TARGET version=V [batch=10%]
// [max_failures=2%] [timeout=SECONDS] [tgt_type=glob]: the targeted devices
// not on V already are updated batch by batch (firmware.update); each
// batch waits for every device's halite/firmware/<id>/updated, rolled_back
// or failed event (or its failed return, or the timeout); past
// max_failures devices failed, the rollout halts before the next batch.
// Each batch fires halite/firmware/rollout/<jid>/batch with its counts.
func (m *Master) runFirmwareRollout(ctx context.Context, req *api.Request) (any, error) {
	a := &args{req: req}
	tgt, err := a.str(0, "tgt", true)
	if err != nil {
		return nil, err
	}
	tgtType, _ := a.str(-1, "tgt_type", false)
	version, err := fwVersion(&api.Request{Kwarg: map[string]any{"version": req.Kwarg["version"]}})
	if req.Kwarg["version"] == nil {
		return nil, badRequest("firmware.rollout: missing required argument \"version\"")
	}
	if err != nil {
		return nil, err
	}
	timeout := 600 * time.Second
	if v, ok := a.get(-1, "timeout"); ok {
		n, ok := toInt(v)
		if !ok || n <= 0 {
			return nil, badRequest("firmware.rollout: timeout %v: want seconds", v)
		}
		timeout = time.Duration(n) * time.Second
	}
	minions, err := m.expected(tgt, tgtType, req.Delimiter)
	if err != nil {
		return nil, err
	}
	r := &rollout{version: version}
	var todo []string
	for _, id := range minions {
		switch {
		case m.minions.grainsOf(id)[grainVersion] == version:
			r.skipped = append(r.skipped, id)
		case m.minions.session(id) == nil:
			r.unreachable = append(r.unreachable, id)
		default:
			todo = append(todo, id)
		}
	}
	n := len(todo)
	r.of = n
	bv, ok := a.get(-1, "batch")
	if !ok {
		bv = "10%"
	}
	batch, err := fraction(bv, n, "batch")
	if err != nil {
		return nil, err
	}
	batch = max(batch, 1)
	fv, ok := a.get(-1, "max_failures")
	if !ok {
		fv = "2%"
	}
	maxFail, err := fraction(fv, n, "max_failures")
	if err != nil {
		return nil, err
	}
	rid := m.jids.Next()
	start := time.Now()
	halted := ""
	nb := 0
	for i := 0; i < n && halted == ""; i += batch {
		ids := todo[i:min(i+batch, n)]
		nb++
		if err := m.rolloutBatch(ctx, req.User, ids, r, timeout); err != nil {
			return nil, err
		}
		m.bus.Publish("halite/firmware/rollout/"+rid+"/batch", map[string]any{
			"batch": nb, "devices": len(ids), "done": min(i+batch, n), "of": n, "version": version,
			"updated": len(r.updated), "failures": r.failures(), "max_failures": maxFail,
			"_stamp": event.Stamp(time.Now()),
		})
		progress(ctx, map[string]any{"message": fmt.Sprintf("batch %d done: %d of %d devices, %d updated, %d failed (max_failures %d)",
			nb, min(i+batch, n), n, len(r.updated), r.failures(), maxFail),
			"batch": nb, "done": min(i+batch, n), "of": n, "updated": len(r.updated), "failures": r.failures()})
		m.log.Info("firmware rollout: batch done", zap.String("version", version), zap.Int("batch", nb),
			zap.Int("done", min(i+batch, n)), zap.Int("of", n), zap.Int("updated", len(r.updated)), zap.Int("failures", r.failures()))
		if r.failures() > maxFail {
			halted = fmt.Sprintf("halted after batch %d: %d devices failed, more than max_failures %d", nb, r.failures(), maxFail)
		}
	}
	list := func(ids []string) []any {
		sort.Strings(ids)
		return toAnyList(ids)
	}
	out := map[string]any{
		"version": version, "targeted": len(minions), "batches": nb, "batch_size": batch, "max_failures": maxFail,
		"updated": list(r.updated), "rolled_back": list(r.rolledBack), "failed": list(r.failed),
		"timed_out": list(r.timedOut), "skipped": list(r.skipped), "unreachable": list(r.unreachable),
		"not_started": len(todo) - len(r.updated) - r.failures(), "seconds": time.Since(start).Seconds(),
		"result": halted == "",
	}
	if halted != "" {
		out["comment"] = halted
	} else {
		out["comment"] = fmt.Sprintf("%d of %d devices updated to %s in %d batches", len(r.updated), n, version, nb)
	}
	return out, nil
}

// rolloutBatch updates ids and waits for each one's outcome.
func (m *Master) rolloutBatch(ctx context.Context, user string, ids []string, r *rollout, timeout time.Duration) error {
	waiting := make(map[string]bool, len(ids))
	for _, id := range ids {
		waiting[id] = true
	}
	jid := m.jids.Next()
	evs := m.bus.Subscribe("halite/firmware/*", 4*len(ids)+16)
	defer evs.Close()
	rets := m.bus.Subscribe("salt/job/"+jid+"/ret/*", len(ids)+16)
	defer rets.Close()
	p, err := m.publish(jid, &api.Request{Tgt: strings.Join(ids, ","), TgtType: "list", Fun: fwFun,
		Kwarg: map[string]any{"version": r.version}, User: user})
	if err != nil {
		return err
	}
	for _, id := range p.notConnected {
		if waiting[id] {
			delete(waiting, id)
			r.failed = append(r.failed, id)
		}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for len(waiting) > 0 {
		select {
		case ev := <-evs.C():
			// halite/firmware/<id>/<what>, sent by <id> itself.
			rest, _ := strings.CutPrefix(ev.Tag, "halite/firmware/")
			id, what, _ := strings.Cut(rest, "/")
			if src, _ := ev.Data["id"].(string); src != id || !waiting[id] {
				continue
			}
			switch what {
			case "updated":
				r.updated = append(r.updated, id)
			case "rolled_back":
				r.rolledBack = append(r.rolledBack, id)
			case "failed":
				r.failed = append(r.failed, id)
			default:
				continue
			}
			delete(waiting, id)
			r.report(ctx, id, what)
		case ev := <-rets.C():
			id, _ := ev.Data["id"].(string)
			if ok, _ := ev.Data["success"].(bool); !ok && waiting[id] {
				delete(waiting, id)
				r.failed = append(r.failed, id)
				r.report(ctx, id, "failed")
			}
		case <-timer.C:
			for id := range waiting {
				r.timedOut = append(r.timedOut, id)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
