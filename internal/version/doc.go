// Package version says which build of Halite a program is: the version and
// commit the Makefile stamps in with -ldflags -X, the Go release, and, for
// --versions-report, the modules the binary was linked with and the system
// it runs on. Every program (the agent too) links it; it imports nothing of
// Halite's.
package version
