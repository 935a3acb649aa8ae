//go:build !race

package discovery

const raceOn = false
