package protocol

// Error tells the peer why the sender is about to close the connection.
type Error struct {
	Kind Kind   `cbor:"1,keyasint"`
	Msg  string `cbor:"2,keyasint,omitempty"`
}

func (*Error) Type() Type { return TypeError }

// Err returns the message as a *ProtoError.
func (e *Error) Err() *ProtoError { return &ProtoError{Kind: e.Kind, Msg: e.Msg} }
