package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/halite-fleet/halite/config"
)

// TestCallerReactor: a masterless agent runs its reactor: section; an
// event fired on its local bus (halite-call event.fire) drives a caller
// reaction that touches a file.
func TestCallerReactor(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "touched")
	sls := filepath.Join(dir, "touch.sls")
	os.WriteFile(sls, []byte("touch_file:\n  caller.cmd.run:\n    - args:\n      - cmd: touch "+target+"\n"), 0o644)
	a := newTestAgent(t, "solo", nil, func(c *config.Agent) {
		c.FileClient = "local"
		c.MasterType = "disable"
		c.Reactor = []any{map[string]any{"my/door/*": []any{sls}}}
	})
	runUntilStopped(t, "agent", a.Run)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	waitFor(t, "the local socket and the reactor", func() bool {
		_, err := LocalCall(ctx, a.cfg.SocketPath(), &LocalRequest{Op: "event.fire", Tag: "my/door/open", Data: map[string]any{"k": "v"}})
		if err != nil {
			return false
		}
		_, err = os.Stat(target)
		return err == nil
	})
}
