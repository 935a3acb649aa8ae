package protocol

import "crypto/ed25519"

// Return is a job's return signed by the agent that ran it, agent to master.
//
// Seq is the agent's outbox sequence number of the return, which the master
// acknowledges with an [Ack] once the return is stored; 0 asks for no ack.
// It lies outside the signed body: a relay could alter it, and the worst it
// can do is make the agent drop an item early or keep it longer. The master
// stores returns idempotently on (jid, id), so one delivered twice is
// stored once.
type Return struct {
	Signed
	Seq uint64 `cbor:"3,keyasint,omitempty"`
}

func (*Return) Type() Type { return TypeReturn }

// ReturnBody is what the agent signs: Salt's return load.
type ReturnBody struct {
	ID      string `cbor:"1,keyasint"`
	JID     string `cbor:"2,keyasint"`
	Fun     string `cbor:"3,keyasint"`
	FunArgs []any  `cbor:"4,keyasint,omitempty"`
	Return  any    `cbor:"5,keyasint"`
	Retcode int    `cbor:"6,keyasint"`
	Success bool   `cbor:"7,keyasint"`
	Stamp   string `cbor:"8,keyasint"`
	// Schedule is the name of the schedule job the return is of (Salt's
	// "schedule" key of a scheduled job's return); "" for a published job.
	Schedule string `cbor:"9,keyasint,omitempty"`
}

// SignReturn encodes and signs b with the agent's key.
func SignReturn(key ed25519.PrivateKey, b *ReturnBody) (*Return, error) {
	s, err := seal(key, domainReturn, b)
	if err != nil {
		return nil, err
	}
	return &Return{Signed: s}, nil
}

// MACReturn encodes b and tags it with the session's MAC key.
func MACReturn(key []byte, b *ReturnBody) (*Return, error) {
	s, err := sealMAC(key, domainReturn, b)
	if err != nil {
		return nil, err
	}
	return &Return{Signed: s}, nil
}

// Open verifies the return with the agent's public key, decodes its body and
// checks that it is from wantID.
func (r *Return) Open(agent ed25519.PublicKey, wantID string) (*ReturnBody, error) {
	return r.OpenWith(agent, nil, wantID)
}

// OpenWith is Open that also accepts a tag made with the session's MAC key.
func (r *Return) OpenWith(agent ed25519.PublicKey, mac []byte, wantID string) (*ReturnBody, error) {
	b := new(ReturnBody)
	if err := r.open(agent, mac, domainReturn, b); err != nil {
		return nil, err
	}
	if b.ID != wantID {
		return nil, Errorf(KindWrongID, "return signed for id %q arrived from %q", b.ID, wantID)
	}
	if !IsJID(b.JID) {
		return nil, Errorf(KindMalformed, "return jid %q is not a 20-digit jid", b.JID)
	}
	return b, nil
}

// Map returns the body as Salt's return dict.
func (b *ReturnBody) Map() map[string]any {
	args := b.FunArgs
	if args == nil {
		args = []any{}
	}
	// Room for the master's "cmd" and a schedule's name too: a map
	// literal of these eight is made for eight, and the master's ninth
	// key (announceReturn) grew it again, for every return.
	m := make(map[string]any, 10)
	m["id"], m["jid"], m["fun"], m["fun_args"] = b.ID, b.JID, b.Fun, args
	m["return"], m["retcode"], m["success"], m["_stamp"] = b.Return, b.Retcode, b.Success, b.Stamp
	if b.Schedule != "" {
		m["schedule"] = b.Schedule
	}
	return m
}
