// Package callcmd is the caller, salt-call's counterpart: it runs an
// execution function on this device, in this process, with the agent's
// configuration and grains.
//
//	halite-call [-c CONFIG_DIR] [--local] [--out FORMAT] FUNCTION [ARG ...] [KEY=VALUE ...]
//	halite-call -g|--grains
//	halite-call -d|--doc [FUNCTION]
//
// It lives in the agent binary (halite-agent call …, or halite-agent run
// under the name halite-call, a symlink on devices) and in cmd/halite-call,
// a thin main for development builds. event.send and event.fire_master go
// through the running agent to the master (with --local they stay on this
// device).
package callcmd
