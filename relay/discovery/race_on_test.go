//go:build race

package discovery

// raceOn: the race detector multiplies memory (the flood test's RSS bound).
const raceOn = true
