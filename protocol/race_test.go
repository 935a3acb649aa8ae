//go:build race

package protocol

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// a pooled buffer is sometimes made anew under -race. make test runs the
// allocation tests without -race as well.
const raceEnabled = true
