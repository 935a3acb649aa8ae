// A broken build for the OTA tests (e2e/ota_test.go): with -tags
// halite_unreachable the agent dials port 9 (discard) of its masters'
// hosts instead of their ports, so it never reaches a master, as a build
// with a bad connect path would not. Never part of a release build.

//go:build halite_unreachable

package main

import (
	"net"

	"github.com/halite-fleet/halite/config"
)

func init() {
	breakConfig = func(cfg *config.Agent) {
		cfg.MasterPort = 9
		for i, m := range cfg.Master {
			if host, _, err := net.SplitHostPort(m); err == nil {
				cfg.Master[i] = net.JoinHostPort(host, "9")
			}
		}
	}
}
