// Package e2e holds Halite's end-to-end tests: they build the real
// binaries, run masters and agents as separate processes on loopback QUIC
// under temporary root_dirs, and drive them with the real CLIs, as a user
// would. It has no code of its own outside its tests.
package e2e
