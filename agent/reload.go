package agent

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent/beacons"
	"github.com/halite-fleet/halite/agent/exec"
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

func init() {
	exec.Register("saltutil.refresh_modules", `Reload what can change in the running agent from its configuration files:
beacons, schedule and engines, all or nothing, as SIGHUP does. Halite's
execution modules are built in, so this is what Salt's module refresh
(the module_refresh event, salt/modules/saltutil.py) comes to here. True
when reloaded; False, with the error in the agent's log, when a part is
bad (nothing is changed then).

CLI Example:

    halite '*' saltutil.refresh_modules`, func(_ context.Context, host any, _ exec.Request) (any, error) {
		a, ok := host.(*Agent)
		if !ok || a.sched == nil {
			return nil, exec.ErrNoHost
		}
		if a.cfg.ConfigDir == "" {
			return nil, fmt.Errorf("no configuration directory to reload from")
		}
		cfg, err := config.LoadAgent(a.cfg.ConfigDir, nil)
		if err == nil {
			err = a.Reload(cfg)
		}
		if err != nil {
			a.log.Error("saltutil.refresh_modules: nothing reloaded", zap.Error(err))
			return false, nil
		}
		return true, nil
	})
}
