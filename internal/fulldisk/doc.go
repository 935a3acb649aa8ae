// Package fulldisk gives tests a small disk of their own that they can
// fill up: a tmpfs mounted on a temporary directory, so that the writes of
// a spool on it fail with ENOSPC as on a device whose flash is full. It is
// imported by tests only (the agent's, the relay's, the returners' and
// e2e's).
package fulldisk
