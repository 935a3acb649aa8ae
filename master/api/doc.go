// Package api is the master's local API: the requests the operator CLIs
// (halite, halite-key, halite-run) send over the master's unix socket, the
// responses the master streams back, and a client for them. The socket is
// sock_dir/master.sock, mode 0600, so only the master's user may use it.
//
// Each request and response is one frame (see protocol.Framer) holding CBOR.
// A connection carries one request; the master answers with one or more
// responses, the last of which has Done set.
package api
