// Package blobs is the master's index of content-addressed chunks: the
// files it may serve by protocol.Manifest (salt:// files too large to go
// inline in a job, agent builds for OTA), each chunk found by its SHA-256.
// The master's sessions answer a device's (or a relay's) BlobGet from it
// (master/blobserve.go); the file server and OTA Add the files whose
// manifests they put into signed jobs. A chunk is read from the file on
// disk when asked for, and checked against its hash before it is served:
// a file changed since it was indexed is hashed again, and its old chunks
// are no longer served.
package blobs
