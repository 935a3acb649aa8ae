package protocol

// Ping asks the peer to answer with a Pong carrying the same Seq.
type Ping struct {
	Seq uint64 `cbor:"1,keyasint"`
}

func (*Ping) Type() Type { return TypePing }

// Pong answers a Ping.
type Pong struct {
	Seq uint64 `cbor:"1,keyasint"`
}

func (*Pong) Type() Type { return TypePong }
