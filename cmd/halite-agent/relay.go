// The relay is built into the agent on the architectures a site VM runs
// (amd64, arm64, ...); on the 32-bit ARM and MIPS devices, whose flash is
// small, only with -tags relay (it adds about 0.25 MiB: QUIC's and TLS's
// server side).

//go:build relay || !(arm || mips || mipsle)

package main

import (
	"context"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
	"github.com/halite-fleet/halite/relay"
)

// runRelay runs the agent's own session and, beside it, the relay its
// relay: section asks for.
func runRelay(ctx context.Context, cfg *config.Agent, a *agent.Agent, log *zap.Logger) error {
	r, err := relay.New(relay.Options{Config: cfg, Identity: a.Identity(), Version: agent.Version,
		Log: log.Named("relay"), Event: a.SendEvent, Pillar: a.Pillar})
	if err != nil {
		return err
	}
	p, set := relay.SetGCPercent(cfg.Relay)
	from := "relay: gc_percent"
	if !set {
		from = "GOGC in the environment, or the agent's beacons"
	}
	log.Info("the Go collector's GOGC", zap.Int("gogc", p), zap.String("from", from))
	stopProfiles, err := startRelayProfiles(ctx, log) // relayprof.go
	if err != nil {
		return err
	}
	defer stopProfiles()
	g, gctx := errgroup.WithContext(ctx)
	rctx, stop := context.WithCancel(gctx)
	// The relay stops with the agent (an update hands over when the
	// agent's Run returns).
	g.Go(func() error { defer stop(); return a.Run(gctx) })
	g.Go(func() error { return r.Run(rctx) })
	return g.Wait()
}
