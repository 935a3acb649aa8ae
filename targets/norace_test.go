//go:build !race

package targets

const raceEnabled = false
