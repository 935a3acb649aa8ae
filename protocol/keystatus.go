package protocol

// Key states, as salt-key names them.
const (
	KeyAccepted = "accepted"
	KeyPending  = "pending"
	KeyRejected = "rejected"
	KeyDenied   = "denied"
)

// KeyStatus answers Hello, master to agent. Unless Status is KeyAccepted the
// master closes the connection after it, and the agent tries again later;
// except that for a pending key, when both sides have CapKeyNotify, the
// master may keep the stream open and send a second KeyStatus (accepted or
// rejected) as soon as the key is decided, which the agent waits for until
// its acceptance wait runs out.
type KeyStatus struct {
	Status   string `cbor:"1,keyasint"`
	MasterID string `cbor:"2,keyasint,omitempty"`
	Caps     uint32 `cbor:"3,keyasint"`
	// KX is the master's ephemeral X25519 public key and KXSig its
	// signature (SignMasterKX), when the agent offered key agreement.
	KX    []byte `cbor:"4,keyasint,omitempty"`
	KXSig []byte `cbor:"5,keyasint,omitempty"`
	// MasterKey is the master's ed25519 public key, sent when the Hello
	// came through a relay (capability 5): the agent's TLS peer is then
	// the relay, and the agent pins this key (master_finger, or on first
	// use) to verify jobs and KXSig, and the relay's key separately.
	MasterKey []byte `cbor:"6,keyasint,omitempty"`
}

func (*KeyStatus) Type() Type { return TypeKeyStatus }

func (k *KeyStatus) validate() error {
	if k.MasterKey != nil && len(k.MasterKey) != 32 {
		return Errorf(KindMalformed, "master key is %d bytes, want 32", len(k.MasterKey))
	}
	switch k.Status {
	case KeyAccepted, KeyPending, KeyRejected, KeyDenied:
		return nil
	}
	return Errorf(KindMalformed, "unknown key status %q", k.Status)
}
