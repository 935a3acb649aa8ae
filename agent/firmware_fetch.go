package agent

import (
	"context"

	"github.com/halite-fleet/halite/protocol"
)

// fetchBuild fetches the build whose manifest the job carries
// (__firmware__["manifest"]) to dst with the agent's Fetcher (blobs.go):
// in verified chunks, resumable (dst.part), through the relay when the
// agent is behind one.
func (a *Agent) fetchBuild(ctx context.Context, fw map[string]any, dst string) error {
	m, err := protocol.ManifestFromAny(fw["manifest"])
	if err != nil {
		return err
	}
	return a.Fetcher().Fetch(ctx, m, dst)
}
