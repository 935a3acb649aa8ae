// Package sshhost checks SSH host keys against a known_hosts file
// (golang.org/x/crypto/ssh/knownhosts): a changed key is always refused,
// a host seen for the first time is recorded only when asked. The flasher
// (firmware/flash) and the relay's ssh proxy minions (relay/proxy) use it.
package sshhost
