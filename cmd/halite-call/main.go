// Command halite-call runs an execution function on this device, like
// salt-call:
//
//	halite-call [-c CONFIG_DIR] [--local] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]
//	halite-call -g|--grains
//	halite-call -d|--doc [FUNCTION]
//
// The caller itself is package internal/callcmd, which the agent binary
// carries too: on a device halite-call is a symlink to halite-agent (or
// halite-agent call …), one file of flash instead of two. This main builds
// the caller alone, for development and tests.
package main

import (
	"os"

	"github.com/halite-fleet/halite/internal/callcmd"
)

func main() { os.Exit(Main()) }

// Main runs the caller with os.Args and returns its exit status.
func Main() int { return callcmd.Main(os.Args[1:], os.Stdout, os.Stderr) }
