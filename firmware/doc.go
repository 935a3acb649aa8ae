// Package firmware will hold the cross-build profiles, provisioning
// bundles, flashing over SSH and signed OTA updates with rollback for the
// agent binary. Today the cross builds are the Makefile's `make cross`
// target (linux amd64, arm64, arm v6 and v7, mipsle softfloat, static,
// stripped). firmware/service has the service files: systemd units for the
// master, the agent and a relay, a SysV/BusyBox init script for the agent
// and a logrotate snippet (rename, then SIGHUP), tested in e2e/service_test.go.
package firmware
