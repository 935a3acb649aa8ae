package protocol

// Ack acknowledges, master to agent, every Return and Event of the
// connection whose Seq is at most Seq: the master stored the returns (on
// disk, in its job cache) and published the events, and the agent may
// forget them. Acks are cumulative, since the master handles a
// connection's messages in order; it may send one per message or one for
// several. Messages with Seq 0 are never acknowledged.
//
// A relay between them sees Seq in the clear and could forge acks: the
// worst it can do is make an agent forget items early, which it could as
// well do by dropping them. A relay passes the master's acks on to the
// device, so acks are end to end.
type Ack struct {
	Seq uint64 `cbor:"1,keyasint"`
}

func (*Ack) Type() Type { return TypeAck }
