package protocol

import "crypto/ed25519"

// MaxTagLen is the longest event tag accepted.
const MaxTagLen = 1024

// Event is an event fired by an agent, signed by it, agent to master.
//
// Seq is the agent's outbox sequence number of the event, acknowledged by
// the master with an [Ack] once the event is published; 0 asks for no ack.
// As for [Return], it lies outside the signed body.
type Event struct {
	Signed
	Seq uint64 `cbor:"3,keyasint,omitempty"`
}

func (*Event) Type() Type { return TypeEvent }

// EventBody is what the agent signs.
type EventBody struct {
	ID    string         `cbor:"1,keyasint"`
	Tag   string         `cbor:"2,keyasint"`
	Data  map[string]any `cbor:"3,keyasint,omitempty"`
	Stamp string         `cbor:"4,keyasint"`
}

// SignEvent encodes and signs b with the agent's key.
func SignEvent(key ed25519.PrivateKey, b *EventBody) (*Event, error) {
	s, err := seal(key, domainEvent, b)
	if err != nil {
		return nil, err
	}
	return &Event{Signed: s}, nil
}

// MACEvent encodes b and tags it with the session's MAC key.
func MACEvent(key []byte, b *EventBody) (*Event, error) {
	s, err := sealMAC(key, domainEvent, b)
	if err != nil {
		return nil, err
	}
	return &Event{Signed: s}, nil
}

// Open verifies the event with the agent's public key, decodes its body and
// checks that it is from wantID.
func (e *Event) Open(agent ed25519.PublicKey, wantID string) (*EventBody, error) {
	return e.OpenWith(agent, nil, wantID)
}

// OpenWith is Open that also accepts a tag made with the session's MAC key.
func (e *Event) OpenWith(agent ed25519.PublicKey, mac []byte, wantID string) (*EventBody, error) {
	b := new(EventBody)
	if err := e.open(agent, mac, domainEvent, b); err != nil {
		return nil, err
	}
	if b.ID != wantID {
		return nil, Errorf(KindWrongID, "event signed for id %q arrived from %q", b.ID, wantID)
	}
	if b.Tag == "" || len(b.Tag) > MaxTagLen {
		return nil, Errorf(KindMalformed, "event tag must be 1 to %d bytes, got %d", MaxTagLen, len(b.Tag))
	}
	return b, nil
}
