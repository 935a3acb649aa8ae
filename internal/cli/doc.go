// Package cli holds what Halite's command-line programs share: Salt-style
// parsing of function arguments, usage errors with Salt's exit status 64, loading
// a daemon's configuration with its warnings, and the -c/-l flags.
package cli
