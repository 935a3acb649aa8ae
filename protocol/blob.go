package protocol

// Content-addressed file transfer (capability CapBlob). A file the master
// serves (a salt:// file, an agent build) is named by its Manifest: its
// size, the SHA-256 of the whole, and the SHA-256 of each ChunkSize chunk.
// The manifest travels inside a job the master signs, so a device knows
// what every chunk must hash to before it asks for one. The device asks for
// chunks by hash, one BlobGet each, on its own session (through its relay,
// which answers from its chunk cache or asks upstream once); the master, or
// the relay, answers with a BlobData. The asker checks sha256(Data) ==
// Hash, so a relay can withhold a chunk but never change one.
//
//	device                     relay                      master
//	  | BlobGet{Req, Hash} ------> | cache hit: BlobData       |
//	  |                            | miss: BlobGet{Req', Hash} -> (one per hash)
//	  |                            | <------ BlobData{Req', Data}
//	  | <------ BlobData{Req, Data}| verified, cached          |
//
// The file server's questions (cp.list_master, cp.hash_file, cp.get_file)
// are FileQuery and FileAnswer: see filequery.go.

// BlobHashSize is the length of a chunk's name: a SHA-256.
const BlobHashSize = 32

// BlobErrUnknown begins the Err of a BlobData for a chunk that no file the
// master serves holds: asking again will not help.
const BlobErrUnknown = "unknown chunk"

// MaxBlobErr bounds BlobData.Err.
const MaxBlobErr = 1024

// BlobGet asks for one chunk by its SHA-256, device (or relay) to master.
// Req is the asker's, echoed by the answer.
type BlobGet struct {
	Req  uint64 `cbor:"1,keyasint"`
	Hash []byte `cbor:"2,keyasint"`
}

func (*BlobGet) Type() Type { return TypeBlobGet }

func (g *BlobGet) validate() error {
	if len(g.Hash) != BlobHashSize {
		return Errorf(KindMalformed, "blob_get hash of %d bytes, want %d", len(g.Hash), BlobHashSize)
	}
	return nil
}

// BlobData answers a BlobGet: the chunk's bytes (at most ChunkSize), or
// Err saying why there are none (an unknown hash, a master that is busy).
// The asker verifies the data against the hash it asked for.
type BlobData struct {
	Req  uint64 `cbor:"1,keyasint"`
	Data []byte `cbor:"2,keyasint,omitempty"`
	Err  string `cbor:"3,keyasint,omitempty"`
}

func (*BlobData) Type() Type { return TypeBlobData }

func (d *BlobData) validate() error {
	switch {
	case len(d.Data) > ChunkSize:
		return Errorf(KindTooLarge, "blob_data of %d bytes, limit %d", len(d.Data), ChunkSize)
	case len(d.Err) > MaxBlobErr:
		return Errorf(KindTooLarge, "blob_data error of %d bytes, limit %d", len(d.Err), MaxBlobErr)
	case d.Err != "" && len(d.Data) > 0:
		return Errorf(KindMalformed, "blob_data with both data and an error")
	}
	return nil
}
