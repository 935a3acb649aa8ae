package agent

import (
	"fmt"

	"github.com/halite-fleet/halite/agent/beacons"
	"github.com/halite-fleet/halite/config"
)

// Reload applies what can change in a running agent of cfg, its
// configuration read again (SIGHUP): the beacons, the schedule (as
// schedule.reload does) and the engines (engines no longer listed stop,
// changed ones restart, new ones start). Every part is checked before any
// is applied: a bad one is an error naming it, and nothing changes. The
// rest (id, masters, returners, the relay) keeps the configuration the
// agent started with.
func (a *Agent) Reload(cfg *config.Agent) error {
	if _, _, err := beacons.ParseConfig(cfg.Beacons, beacons.DefaultInterval); err != nil {
		return fmt.Errorf("reload beacons: %w", err)
	}
	// The schedule's errors name the file and line of the job: the new
	// positions are in place while it is checked.
	oldAt := a.schedAt.Load()
	at := cfg.ScheduleAt
	a.schedAt.Store(&at)
	if err := a.sched.Check(cfg.Schedule); err != nil {
		a.schedAt.Store(oldAt)
		return fmt.Errorf("reload schedule: %w", err)
	}
	if err := a.engines.m.Check(cfg.Engines); err != nil {
		a.schedAt.Store(oldAt)
		return fmt.Errorf("reload engines: %w", err)
	}
	// Checked: Replace cannot refuse what Check passed.
	if err := a.beacons.Replace(cfg.Beacons); err != nil {
		return fmt.Errorf("reload beacons: %w", err)
	}
	if err := a.sched.Replace(cfg.Schedule); err != nil {
		return fmt.Errorf("reload schedule: %w", err)
	}
	if err := a.engines.m.Replace(cfg.Engines); err != nil {
		return fmt.Errorf("reload engines: %w", err)
	}
	return nil
}
