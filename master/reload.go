package master

import (
	"fmt"

	"github.com/halite-fleet/halite/config"
)

// Reload applies what can change in a running master of cfg, its
// configuration read again (SIGHUP): the schedule and the engines (engines
// no longer listed stop, changed ones restart, new ones start). Both are
// checked before either is applied: a bad one is an error naming it (a
// schedule job with its file and line), and nothing changes. The reactor
// rereads its own rules (reactor.go); the rest keeps the configuration
// the master started with.
func (m *Master) Reload(cfg *config.Master) error {
	oldAt := m.schedAt.Load()
	at := cfg.ScheduleAt
	m.schedAt.Store(&at)
	if err := m.sched.Check(cfg.Schedule); err != nil {
		m.schedAt.Store(oldAt)
		return fmt.Errorf("reload schedule: %w", err)
	}
	if err := m.engines.mgr.Check(cfg.Engines); err != nil {
		m.schedAt.Store(oldAt)
		return fmt.Errorf("reload engines: %w", err)
	}
	// Checked: Replace cannot refuse what Check passed.
	if err := m.sched.Replace(cfg.Schedule); err != nil {
		return fmt.Errorf("reload schedule: %w", err)
	}
	if err := m.engines.mgr.Replace(cfg.Engines); err != nil {
		return fmt.Errorf("reload engines: %w", err)
	}
	return nil
}
