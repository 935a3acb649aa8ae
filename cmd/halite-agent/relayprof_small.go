//go:build relay && (arm || mips || mipsle)

package main

import (
	"context"

	"go.uber.org/zap"
)

// startRelayProfiles does nothing on a small device's agent built with
// -tags relay: runtime/pprof would add about 0.2 MiB (relayprof.go).
func startRelayProfiles(context.Context, *zap.Logger) (stop func(), err error) {
	return func() {}, nil
}
