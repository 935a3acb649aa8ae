// Package blob is the agent's side of content-addressed file transfer: a
// Fetcher writes a file named by a protocol.Manifest (from a signed job)
// by asking for its chunks by hash, through whatever carries them (the
// agent's session with its master, through a relay), checking each chunk
// and the whole file before it replaces the destination. It is used by the
// state modules (file.managed with a salt:// source too large for the job)
// and by agent/ota; the agent provides the Getter (agent/blobs.go).
package blob
