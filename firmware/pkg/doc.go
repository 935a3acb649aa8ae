// Package pkg makes Halite's system packages with nfpm
// (github.com/goreleaser/nfpm/v2): .deb packages for gateways and relay VMs
// (halite-agent, halite-relay, halite-master) and .ipk packages for OpenWrt
// (halite-agent), from the binaries of `make cross` (dist/linux-ARCH).
//
// A package carries its programs in /usr/bin (the agent's halite-call is a
// symlink to halite-agent, which is multi-call), its configuration in
// /etc/halite as a conffile (an example that an upgrade never overwrites
// once edited; a copy of it stays in /usr/share/halite), the service (a
// systemd unit from firmware/service for .deb, the procd script from
// firmware/files for .ipk), a logrotate file, and /var/lib/halite and
// /var/log/halite. Its maintainer scripts enable the service and start it,
// except an agent or relay whose configuration is still the example (no
// master set, no key pinned): a systemd drop-in (ExecCondition) and the
// procd script also keep such an agent from starting at boot.
//
// Versions are made valid for dpkg and opkg (Version: a `git describe` such
// as v1.2-3-gabc1234 becomes 1.2+3.gabc1234, which sorts after 1.2 and
// before 1.3), and architectures named as Debian and OpenWrt name them
// (Arch). Binaries are checked to be ELF executables of the package's
// architecture before they go in.
//
// It is an operator-side package: only cmd/halite-flash imports it, and
// nfpm is never linked into the agent (cmd/halite-agent/deps_test.go).
package pkg
