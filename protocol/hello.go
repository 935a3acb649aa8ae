package protocol

// MaxIDLen is the longest agent id accepted.
const MaxIDLen = 255

// Hello is the first message of a connection, agent to master: the id the
// agent claims (its key comes from the TLS handshake), its version and
// capability number, and its grains so the master can match targets.
type Hello struct {
	ID      string         `cbor:"1,keyasint"`
	Version string         `cbor:"2,keyasint"`
	Caps    uint32         `cbor:"3,keyasint"`
	Grains  map[string]any `cbor:"4,keyasint,omitempty"`
	Relay   bool           `cbor:"5,keyasint,omitempty"` // the agent is a relay
	// KX is the agent's ephemeral X25519 public key and KXSig its
	// signature (SignAgentKX), to agree a session MAC key (see KX).
	KX    []byte `cbor:"6,keyasint,omitempty"`
	KXSig []byte `cbor:"7,keyasint,omitempty"`
	// Returners are the agent's `return:` option: returners the master
	// also sends every return of this agent to (capability 3).
	Returners []string `cbor:"8,keyasint,omitempty"`
	// Pub is the agent's ed25519 public key, set by a relay that forwards
	// a device's Hello on its upstream link (capability 5); on a direct
	// connection the key comes from the TLS handshake and Pub is empty.
	// The master believes it only with a KXSig that verifies under it.
	Pub []byte `cbor:"9,keyasint,omitempty"`
}

func (*Hello) Type() Type { return TypeHello }

func (h *Hello) validate() error {
	if h.Pub != nil && len(h.Pub) != 32 {
		return Errorf(KindMalformed, "hello key is %d bytes, want 32", len(h.Pub))
	}
	return ValidID(h.ID)
}

// ValidID checks an agent id: 1..MaxIDLen bytes, no control characters, no
// '/' (ids appear in event tags and file names), and not "." or "..".
func ValidID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return Errorf(KindMalformed, "id must be 1 to %d bytes, got %d", MaxIDLen, len(id))
	}
	if id == "." || id == ".." {
		return Errorf(KindMalformed, "id %q is not allowed", id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f || c == '/' || c == '\\' {
			return Errorf(KindMalformed, "id %q has a forbidden character at byte %d", id, i)
		}
	}
	return nil
}

// MaxHelloFrame is the largest Hello frame a master or relay reads. A
// Hello comes before the sender's key is checked, and its CBOR decodes to
// up to some 70 times its size (empty maps), so it is read with this limit
// rather than the connection's frame limit (max_frame), before anything is
// allocated for it. Grains that do not fit follow in a Grains message once
// the key is accepted (EncodeHello).
const MaxHelloFrame = 64 << 10

// EncodeHello encodes h as it is sent: the Hello's frame body, and, when h
// with its grains would not fit MaxHelloFrame, a Grains message's frame
// body to send once the master has accepted the key (the Hello then goes
// without its grains). late is nil when the grains fit in the Hello.
func EncodeHello(h *Hello) (hello, late []byte, err error) {
	hello, err = Encode(h)
	if err != nil || len(hello) <= MaxHelloFrame || h.Grains == nil {
		return hello, nil, err
	}
	bare := *h
	bare.Grains = nil
	if hello, err = Encode(&bare); err != nil {
		return nil, nil, err
	}
	if late, err = Encode(&Grains{Grains: h.Grains}); err != nil {
		return nil, nil, err
	}
	return hello, late, nil
}
