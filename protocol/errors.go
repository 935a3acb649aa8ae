package protocol

import (
	"errors"
	"fmt"
)

// Kind is the stable code of an error that crosses the wire. Codes are
// append-only: never renumber or reuse one. Tests match the kind, not the text.
type Kind uint16

const (
	KindOther       Kind = 0  // an error with no more specific kind
	KindMalformed   Kind = 1  // a frame or message that does not decode
	KindTooLarge    Kind = 2  // a frame or field over its limit
	KindUnknownType Kind = 3  // a message type this peer does not know
	KindBadSig      Kind = 4  // a signature that does not verify
	KindWrongID     Kind = 5  // a signed id differs from the sender's identity
	KindNotAccepted Kind = 6  // the sender's key is not accepted
	KindForbidden   Kind = 7  // a message the sender may not send (e.g. a reserved tag)
	KindUnexpected  Kind = 8  // a valid message at the wrong point of the flow
	KindVersion     Kind = 9  // incompatible protocol version
	KindShutdown    Kind = 10 // the peer is going away
	KindRateLimited Kind = 11 // the sender sent too much, too fast
	KindPendingFull Kind = 12 // the master holds as many pending keys as it may (max_pending_keys)
)

var kindNames = [...]string{
	KindOther:       "other",
	KindMalformed:   "malformed",
	KindTooLarge:    "too large",
	KindUnknownType: "unknown message type",
	KindBadSig:      "bad signature",
	KindWrongID:     "wrong id",
	KindNotAccepted: "key not accepted",
	KindForbidden:   "forbidden",
	KindUnexpected:  "unexpected message",
	KindVersion:     "version mismatch",
	KindShutdown:    "shutting down",
	KindRateLimited: "rate limited",
	KindPendingFull: "too many pending keys",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint16(k))
}

// ProtoError is a protocol error with a stable kind.
type ProtoError struct {
	Kind Kind
	Msg  string
}

func (e *ProtoError) Error() string {
	if e.Msg == "" {
		return "protocol: " + e.Kind.String()
	}
	return "protocol: " + e.Kind.String() + ": " + e.Msg
}

// Errorf returns a *ProtoError of the given kind.
func Errorf(k Kind, format string, args ...any) *ProtoError {
	return &ProtoError{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err if it is (or wraps, also through
// errors.Join) a *ProtoError, else KindOther.
func KindOf(err error) Kind {
	var pe *ProtoError
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return KindOther
}
