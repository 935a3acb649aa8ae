// Package ota updates the running agent binary over the air, A/B, with a
// rollback that survives a power cut at any step. The agent (package
// agent) drives it: the job firmware.update stages a build, the old
// process watches the new one on trial, and every start of the agent
// first settles what an earlier update left behind (Recover).
//
// # Files
//
// Beside the running binary B (os.Executable, symlinks resolved; its
// folder must be writable):
//
//	B        the build that boots: the init system starts it
//	B.new    the build on trial (fetched in chunks to B.new.part, resumable)
//	B.trial  the trial marker: version, the build it replaces, SHA-256,
//	         when it started, its timeout, and why it failed (if it did)
//	B.prev   the build B was before the last committed update
//	B.ota    the last result (updated, rolled_back), for firmware.status
//
// # Steps and the commit point
//
//  1. Fetch B.new (B.new.part, chunk by chunk, each verified; the whole
//     SHA-256 checked again here), chmod 0755, fsync.
//  2. Write B.trial atomically (temporary file, fsync, rename, fsync of
//     the folder).
//  3. The old process stops its agent (the spool and the job log are
//     closed; the firmware.update return waits in the spool) and starts
//     B.new as its child with HALITE_OTA=trial. The old process is the
//     watchdog (Watch): it waits for the child and for update_trial_timeout.
//  4. The child runs the agent. When a master accepts its session (the
//     key status "accepted", also through a relay), it commits: B is
//     hard-linked to B.prev, then B.new is renamed over B. That rename is
//     the commit point. The child then stops and exits.
//  5. The watchdog sees the child gone. B.new gone means committed; else
//     (the child crashed, exited, or was still unaccepted at the timeout
//     and killed) it writes the reason into B.trial. Either way it execs
//     B with the original arguments and HALITE_OTA=restart, keeping its
//     process id (what init supervises stays the same process).
//  6. Every normal start runs Recover: B.trial present and B.new present
//     means the trial did not commit (whatever stopped it: the watchdog,
//     a crash, a power cut, kill -9 of either process), so B is still the
//     old build: the agent fires halite/firmware/<id>/rolled_back, B.trial
//     and then B.new are removed. B.trial present and B.new absent means
//     the rename happened: the agent fires halite/firmware/<id>/updated
//     and removes B.trial. The event goes to the durable outbox before the
//     marker goes, so a cut in between repeats the event, never loses it.
//
// A power cut at any step leaves B bootable: before the rename B is the
// old build, after it the new one, which has already reached a master.
// The child dies with its watchdog (PR_SET_PDEATHSIG), so a kill -9 of
// the old process never leaves an unwatched build on trial: the init
// system's restart of B settles it as above.
//
// Costs: for the trial (at most update_trial_timeout) two agent processes
// are resident, and the new build connects twice (its trial session, then
// its real one after the exec).
//
// The package imports the standard library and internal/atomicfile only.
package ota
