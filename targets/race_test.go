//go:build race

package targets

// raceEnabled: the race detector makes sync.Pool drop items, so regexp
// matching allocates under -race.
const raceEnabled = true
