//go:build !relay && (arm || mips || mipsle)

package main

import (
	"context"
	"fmt"
	"runtime"

	"go.uber.org/zap"

	"github.com/halite-fleet/halite/agent"
	"github.com/halite-fleet/halite/config"
)

// runRelay refuses: this small-device build has no relay (see relay.go).
func runRelay(_ context.Context, _ *config.Agent, _ *agent.Agent, _ *zap.Logger) error {
	return fmt.Errorf("relay: section, but this %s halite-agent was built without the relay (go build -tags relay)", runtime.GOARCH)
}
