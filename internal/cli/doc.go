// Package cli holds what Halite's command-line programs share: Salt-style
// parsing of function arguments, usage errors with exit status 2, loading
// a daemon's configuration with its warnings, and the -c/-l flags.
package cli
