// Package flash puts the Halite agent onto devices over SSH: halite-flash
// ssh. It sits on the operator's side, beside the master (it imports
// master/keys and master/api to enrol the devices' keys; nothing of it is in
// the agent binary).
//
// For each device, over one authenticated SSH connection (host key checked
// against known_hosts, golang.org/x/crypto/ssh/knownhosts), it probes the
// device with one POSIX sh script (uname -m, /proc/cpuinfo, the byte order
// of /bin/sh, free space, whether the install directory is writable, the
// init system, the agent key already there), picks the agent build for the
// architecture, makes the master accept the device's key (firmware.Master:
// the key the flasher read from the device or made for it, delivered over
// the same session, so there is never a pending key an impostor could race),
// streams the files with plain `cat > FILE` sessions (no scp or sftp:
// dropbear often has neither) into a staging directory beside the install
// directory, and runs the bundle's install.sh there (the one `halite-flash
// bundle` ships), which renames the binary into place, installs the init
// script for the init system it finds and starts the agent.
//
// Run flashes many devices at once (Options.Jobs), never stopping the
// batch for one device; each Result carries an error Kind and a message
// that says what to do. Devices done are appended to a state file and
// skipped by the next run.
package flash
