package relay

import (
	"time"

	"github.com/halite-fleet/halite/protocol"
	"github.com/halite-fleet/halite/targets"
)

// A job the master publishes the moment it has attached a device's session
// (it does so before it writes the device's accepted KeyStatus) comes on
// the link's control stream, while the status comes on the device's own
// stream: the relay can fan the job out before it has read the status and
// taken the device in, and the device would never see it. So the relay
// keeps the jobs it fanned out in the last recentJobAge, and a device it
// takes in gets those that came since shortly before its status
// (recentSlack) and are for it. A job it gets twice (fanned out and
// replayed in the same instant) it runs once: agents refuse a job id they
// took already; the relay, which is a proxy minion's agent, does the same
// for it (proxySession.firstRun).
const (
	recentJobAge   = 10 * time.Second
	recentSlack    = time.Second
	recentMaxJobs  = 64
	recentMaxBytes = 4 << 20
)

// recentJob is a job as fanOut sent it, with whom it was for.
type recentJob struct {
	at    time.Time
	wire  []byte
	body  *protocol.JobBody
	names map[string]bool  // the ids the master named (nil: by target)
	match *targets.Matcher // the target, when the relay could compile it
}

// wants reports whether j is for device d (mn is scratch space).
func (j *recentJob) wants(d *device, mn *targets.Minion) bool {
	if j.match != nil && j.names == nil {
		return j.wantsMinion(d.id, d.grains(), mn)
	}
	return j.wantsMinion(d.id, nil, mn)
}

// wantsMinion reports whether j is for the minion id with grains (used
// only for a target the relay matches; mn is scratch space).
func (j *recentJob) wantsMinion(id string, grains map[string]any, mn *targets.Minion) bool {
	switch {
	case j.names != nil:
		return j.names[id]
	case j.match != nil:
		mn.ID, mn.Grains = id, grains
		return j.match.Match(mn)
	}
	return true // a target the relay cannot check: every device checks it
}

// recentSince returns the recent jobs fanned out at or after since.
func (r *Relay) recentSince(since time.Time) []recentJob {
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	var out []recentJob
	for _, j := range r.recent {
		if !j.at.Before(since) {
			out = append(out, j)
		}
	}
	return out
}

// replayProxy runs, on proxy minion p just accepted, the recent jobs for
// it: the relay reads a proxy minion's status in its sweep (up to 2 s
// after it came, more on a busy machine), so every job of the last
// recentJobAge is looked at.
// p.firstRun keeps a job from running twice (fanned out to p as well, or
// replayed again after a session that ended soon).
func (r *Relay) replayProxy(p *proxySession) {
	var mn targets.Minion
	for _, j := range r.recentSince(time.Now().Add(-recentJobAge)) {
		p.mu.Lock()
		dg := p.devGrains
		p.mu.Unlock()
		g := p.m.GrainsWith(dg)
		if !j.wantsMinion(p.m.ID(), g, &mn) || !p.firstRun(j.body.JID) {
			continue
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.runProxyJob(p, j.body, g)
		}()
	}
}

// fanOutTo records j among the recent jobs and returns the devices to send
// it to now, under recentMu: a device taken in (takeIn) is either among
// them or gets j from takeIn, never both.
func (r *Relay) fanOutTo(j recentJob) []*device {
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	cut := 0
	for cut < len(r.recent) && (j.at.Sub(r.recent[cut].at) > recentJobAge ||
		len(r.recent)-cut >= recentMaxJobs || r.recentBytes+len(j.wire) > recentMaxBytes) {
		r.recentBytes -= len(r.recent[cut].wire)
		r.recent[cut] = recentJob{}
		cut++
	}
	r.recent = append(r.recent[cut:], j)
	r.recentBytes += len(j.wire)
	return r.snapshot()
}

// takeIn makes d, whose accepted status the relay read at status, the
// device under its id and returns the one it replaces (or nil), and the
// recent jobs d missed.
func (r *Relay) takeIn(d *device, status time.Time) (old *device, missed [][]byte) {
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	r.mu.Lock()
	old = r.devices[d.id]
	r.devices[d.id] = d
	r.mu.Unlock()
	var mn targets.Minion
	for i := range r.recent {
		j := &r.recent[i]
		if !j.at.Before(status.Add(-recentSlack)) && j.wants(d, &mn) {
			missed = append(missed, j.wire)
		}
	}
	return old, missed
}
