// Package grains collects an agent's grains: static facts about the device it
// runs on (os, kernel, cpu, memory, network addresses, machine id), under
// Salt's grain names, with the config file's `grains:` laid on top.
//
// It sits in the agent, below the executor (grains.* functions) and the
// connection to the master, which sends the grains on connect and after
// saltutil.refresh_grains so the master knows which agents a target expects.
// It reads /proc, /sys and /etc directly and runs no commands, so it works on
// small devices without coreutils and costs a few milliseconds.
package grains
