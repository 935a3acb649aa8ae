// A broken build for the OTA tests (e2e/ota_test.go): with -tags
// halite_unreachable the agent dials port 9 (discard) of its master's host
// instead of master_port, so it never reaches a master, as a build with a
// bad connect path would not. Never part of a release build.

//go:build halite_unreachable

package main

import "github.com/halite-fleet/halite/config"

func init() {
	breakConfig = func(cfg *config.Agent) { cfg.MasterPort = 9 }
}
