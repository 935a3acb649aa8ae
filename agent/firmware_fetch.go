package agent

import (
	"context"
	"errors"
)

// fetchBuild fetches the build whose manifest the job carries
// (__firmware__["manifest"]) to dst, in verified chunks, resumable, through
// the relay when the agent is behind one.
func (a *Agent) fetchBuild(ctx context.Context, fw map[string]any, dst string) error {
	return errors.New("this agent has no chunk transport yet (BlobGet, capability 11)")
}
