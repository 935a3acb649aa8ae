// Package firmware puts the Halite agent onto devices: the cross-build
// profiles (Arches, the Makefile's `make cross` flags: static, stripped,
// inlining off on 32-bit ARM and MIPS), architecture detection from what a
// device reports (DetectArch), provisioning bundles (Bundle: the agent, its
// configuration with the master's key pinned by master_finger, an init
// script for systemd, SysV/BusyBox and OpenWrt procd, and install.sh, a
// POSIX installer that runs under BusyBox ash), and the enrolment of
// devices' keys with the master without a pending step (Master.Enrol:
// through the running master's wheel, or into its key store when it is
// stopped, as Salt's preseeded keys), and the devices the relays found
// (Master.Discovered: the master's discovery.list, for halite-flash ssh
// --from-discovery). Package firmware/flash flashes devices
// over SSH with it; firmware/pkg makes .deb and .ipk packages with the
// same service files (ServiceFile); cmd/halite-flash is the command.
//
// It is an operator-side package: it imports master/keys and master/api,
// and nothing of it is linked into the agent.
//
// firmware/service has the service files installed on gateways and relay
// VMs (systemd units for the master, the agent and a relay, the SysV/BusyBox
// init script, a logrotate snippet), tested in e2e/service_test.go;
// firmware/files has install.sh and the procd script.
package firmware
