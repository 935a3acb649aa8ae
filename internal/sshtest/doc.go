// Package sshtest is an SSH server for tests (golang.org/x/crypto/ssh's
// server side): password authentication, exec requests run with sh -c on
// the test's machine, their exit status returned. The relay's ssh proxy
// minions are tested against it on loopback and in the end-to-end tests.
package sshtest
