// Package keys is the master's key store: which agent ids may connect, with
// which ed25519 key, as salt-key manages them. It sits under master/, between
// the listener (which calls Check with the key an agent proved in its TLS
// handshake, and AcceptedKey on every message) and the operator's halite-key
// commands (List, Accept, Reject, Delete, Finger), which reach it through the
// master's local socket. The master is the only writer.
//
// On disk it keeps Salt's layout under the master's pki_dir, so a Salt user
// finds the keys where salt-key puts them:
//
//	pki_dir/minions/<id>           accepted
//	pki_dir/minions_pre/<id>       pending (unaccepted)
//	pki_dir/minions_rejected/<id>  rejected
//	pki_dir/minions_denied/<id>    denied: a key presented for an id that
//	                               already has an accepted or pending key
//	pki_dir/minions_pre_via/<id>   not Salt's: the id of the relay a pending
//	                               key came through (one line); none for a
//	                               key that came directly
//
// Each file holds the agent's PEM "PUBLIC KEY" (protocol.EncodePublicKey),
// mode 0644, in 0700 directories. Files are written to a temporary file in
// the same directory and renamed into place; moves between states are
// renames; the directory is synced after each change. Everything is loaded
// into memory at Open and served from there. A minions_pre_via file is
// written the same way when a key becomes or stays pending through a relay
// (rewritten if the device moved), and removed when the key leaves pending
// (accepted, rejected, deleted) or comes directly; one whose key is not
// pending is removed at Open. The relay is not kept once a key is accepted:
// halite-key shows it so that an operator can tell where an unknown device
// is before accepting it.
//
// The rules of Check are those of Salt 3006 (salt/channel/server.py _auth):
//
//   - an id with a rejected key stays rejected, whatever key it presents;
//   - an accepted id presenting its key is accepted; presenting another key
//     it is denied, the new key is written to minions_denied and the accepted
//     key is kept;
//   - a pending id is moved to rejected when autoreject_file matches it;
//     presenting another key it is denied (the pending key is kept); with
//     auto_accept or an autosign_file match it is accepted; else it stays
//     pending;
//   - an unknown id is written to minions_rejected when autoreject_file
//     matches it, to minions when auto_accept is set or autosign_file matches
//     it, and to minions_pre otherwise.
//
// A new key that would go to pending while max_pending_keys keys are
// pending already is refused (a protocol.KindPendingFull error); nothing is
// written.
//
// Ids are file names and are checked by protocol.ValidID wherever they
// enter: Check, and Open for the files found on disk. A key file found at
// Open under a name that is not a valid id (one kept from before the rule
// refused glob and list characters, say "cam9,evil") is not loaded: no
// agent may use it and no operation acts on it; Invalid lists it, and the
// operator removes the file by hand. Operations take Salt's match
// expression (Accept, Reject, Delete, Finger: comma-separated globs, as
// salt/key.py Key.name_match) or a Dict of exact ids (AcceptDict,
// RejectDict, DeleteDict: Salt's match_dict), which the master uses
// wherever one id, not a pattern, is meant.
//
// autosign_file and autoreject_file hold one expression per line ('#' starts
// a comment line) matched as Salt's expr_match does: exact, then a shell glob,
// then a regular expression anchored at both ends. A file that others (or the
// group) may write is ignored with a warning, as Salt does. Files are re-read
// when they change.
package keys
