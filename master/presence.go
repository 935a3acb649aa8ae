package master

import (
	"context"
	"time"

	"github.com/halite-fleet/halite/event"
)

// presenceLoop fires salt/presence/change when minions connected or went
// away, and salt/presence/present with the connected list, every
// loop_interval seconds (default 1), as Salt's presence_events.
func (m *Master) presenceLoop(ctx context.Context) error {
	interval := time.Second
	if m.cfg.LoopInterval > 0 {
		interval = time.Duration(m.cfg.LoopInterval) * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		joined, left := m.minions.presenceChanges()
		if len(joined) > 0 || len(left) > 0 {
			m.bus.Publish(event.TagPresenceChange, map[string]any{
				"new": toAnyList(joined), "lost": toAnyList(left),
			})
			m.bus.Publish(event.TagPresencePresent, map[string]any{"present": toAnyList(m.minions.connected())})
		}
	}
}
