// Package proxy is the relay's proxy minions (Salt's proxy minions and
// deltaproxy, salt/proxy and salt/metaproxy/deltaproxy.py): site devices
// that cannot run the agent (closed camera firmware that speaks only
// ONVIF or HTTP, or a box with SSH and no room for a binary) are managed
// through the relay, which is their agent. Each relay: proxy: entry is a
// Minion with its own id and grains; the relay (relay/proxies.go) gives
// it a session with the master under a key it keeps for it, fans jobs to
// it with its devices, and calls Minion.Call for each one.
//
// A Minion holds its configuration and a driver of its proxytype: ssh
// (golang.org/x/crypto/ssh, a connection per call, the host key checked
// against known_hosts with internal/sshhost), onvif (SOAP 1.2 over HTTP
// with a WS-Security UsernameToken, PasswordDigest) or http (a REST
// device under one base URL). An idle Minion owns no goroutine and no
// connection: a thousand of them cost a few hundred KiB. Every call has
// a deadline (the entry's timeout, or the job's when shorter), so one
// device that hangs delays only its own calls.
//
// Credentials come from the entry or, better, from the relay's own pillar
// (password_pillar: proxy:cam7:password), which the master seals to the
// relay alone; they are read at each call and never written to disk.
package proxy
